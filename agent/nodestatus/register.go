package nodestatus

import (
	"context"
	"encoding/json"
	"fmt"
	goruntime "runtime"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// initialNode is the Node's metadata and spec as the kubelet registers them.
func (m *Manager) initialNode() *v1.Node {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.NodeName, Labels: map[string]string{
		"kubernetes.io/hostname":  m.NodeName,
		"kubernetes.io/os":        goruntime.GOOS,
		"kubernetes.io/arch":      goruntime.GOARCH,
		"beta.kubernetes.io/os":   goruntime.GOOS,
		"beta.kubernetes.io/arch": goruntime.GOARCH,
	}}}
	for k, v := range m.Labels {
		node.Labels[k] = v
	}
	node.Spec.Taints = append([]v1.Taint(nil), m.Taints...)
	// As the kubelet with enableControllerAttachDetach (the only setting the agent takes): the
	// attach/detach controller attaches this node's volumes only when the Node says so.
	node.Annotations = map[string]string{ControllerManagedAttachAnnotation: "true"}
	return node
}

// ControllerManagedAttachAnnotation tells the attach/detach controller that it attaches and
// detaches the node's volumes.
const ControllerManagedAttachAnnotation = "volumes.kubernetes.io/controller-managed-attach-detach"

// defaultLabels are the labels the kubelet sets again on a Node registered before.
var defaultLabels = []string{v1.LabelHostname, v1.LabelTopologyZone, v1.LabelTopologyRegion, v1.LabelFailureDomainBetaZone,
	v1.LabelFailureDomainBetaRegion, v1.LabelInstanceTypeStable, v1.LabelInstanceType, v1.LabelOSStable, v1.LabelArchStable,
	v1.LabelWindowsBuild, "beta.kubernetes.io/os", "beta.kubernetes.io/arch"}

// reconcileExisting is the merge patch that brings a Node registered before to what this agent
// registers, as the kubelet reconciles it: its default labels and the attach/detach annotation;
// nil when nothing differs.
func reconcileExisting(initial, existing *v1.Node) []byte {
	labels, annotations := map[string]any{}, map[string]any{}
	for _, k := range defaultLabels {
		want, ok := initial.Labels[k]
		if !ok || existing.Labels[k] == want {
			continue
		}
		if want == "" {
			labels[k] = nil
		} else {
			labels[k] = want
		}
	}
	if want := initial.Annotations[ControllerManagedAttachAnnotation]; existing.Annotations[ControllerManagedAttachAnnotation] != want {
		annotations[ControllerManagedAttachAnnotation] = want
	}
	meta := map[string]any{}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	if len(annotations) > 0 {
		meta["annotations"] = annotations
	}
	if len(meta) == 0 {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"metadata": meta})
	return b
}

// Run records the agent's start, then keeps the Node current until ctx ends: in memory only
// without a client; with one it registers the node (retrying), then updates status and lease.
func (m *Manager) Run(ctx context.Context) {
	// Tools match the kubelet's wording, so the agent keeps it.
	m.record([]event{{v1.EventTypeNormal, "Starting", "Starting kubelet."}})
	if m.Client == nil {
		m.runStandalone(ctx)
		return
	}
	if m.PodCIDR != "" {
		// As with the kubelet, the controller-manager's allocation wins; say so rather than
		// leave the user to find out which range pods got.
		m.Log.Warn("podCIDR is used only without an API server: pods get the Node's spec.podCIDRs",
			"podCIDR", m.PodCIDR, "node", m.NodeName)
	}
	for {
		err := m.Register(ctx)
		if err == nil {
			break
		}
		m.Log.Warn("register node", "node", m.NodeName, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	m.keepCurrent(ctx)
}

func (m *Manager) runStandalone(ctx context.Context) {
	m.Build(ctx)
	m.syncPodCIDR(ctx)
	t := time.NewTicker(m.StatusUpdateFrequency)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.Build(ctx)
			m.syncPodCIDR(ctx)
		}
	}
}

// Register creates the Node, or refreshes the status of an existing one.
func (m *Manager) Register(ctx context.Context) error {
	node := m.initialNode()
	m.fillStatus(ctx, &node.Status)
	// The apiserver may drop a created Node's status, so the conditions (and their events) come
	// with the status update that follows, compared with what the apiserver then holds.
	node.Status.Conditions = nil
	created, err := m.Client.Nodes().Create(ctx, node, metav1.CreateOptions{})
	switch {
	case err == nil:
		m.nodeUID.Store(created.UID)
		// Status is a subresource: a create may drop it, so write it once more.
		return m.UpdateStatus(ctx)
	case apierrors.IsAlreadyExists(err):
		existing, err := m.Client.Nodes().Get(ctx, m.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		m.nodeUID.Store(existing.UID)
		if patch := reconcileExisting(node, existing); patch != nil {
			m.Log.Info("node was previously registered: reconciling its labels and annotations", "node", m.NodeName, "patch", string(patch))
			if _, err := m.Client.Nodes().Patch(ctx, m.NodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				return fmt.Errorf("reconcile the registered node: %w", err)
			}
		}
		m.mu.Lock()
		m.resetExtended = m.Devices != nil && m.Devices.ShouldResetExtendedResourceCapacity()
		m.mu.Unlock()
		return m.UpdateStatus(ctx)
	}
	return err
}
