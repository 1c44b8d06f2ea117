package nodestatus

import (
	"context"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// syncPodCIDR hands the runtime the node's pod CIDRs, as the kubelet does after each status sync:
// from the Node's spec in a cluster (the controller-manager allocates them), from Deps.PodCIDR
// (podCIDR, --pod-cidr) standalone. A runtime with its own default network then gives pods
// addresses no other node hands out. Sent again only when they change; a failure is retried with
// the next status sync.
func (m *Manager) syncPodCIDR(ctx context.Context) {
	want := m.PodCIDR
	if m.Client != nil {
		// The watched Node first: the controller-manager allocates the range after the
		// registration, and the runtime's network may wait for it.
		node, ok := m.Node()
		if m.Watched != nil {
			if w, err := m.Watched(); err == nil && w != nil && w.Name == m.NodeName {
				node, ok = w, true
			}
		}
		if !ok {
			return
		}
		want = strings.Join(node.Spec.PodCIDRs, ",")
		if want == "" {
			want = node.Spec.PodCIDR
		}
	}
	m.mu.Lock()
	sent := m.sentPodCIDR
	m.mu.Unlock()
	if want == "" || want == sent || m.Runtime == nil {
		return
	}
	_, err := m.Runtime.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{
		RuntimeConfig: &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: want}}})
	if err != nil {
		m.Log.Warn("hand the pod CIDR to the runtime", "podCIDR", want, "err", err)
		return
	}
	m.Log.Info("pod CIDR handed to the runtime", "podCIDR", want)
	m.mu.Lock()
	m.sentPodCIDR = want
	m.mu.Unlock()
}
