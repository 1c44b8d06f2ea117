package nodestatus

import (
	"context"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// jitter spreads the agent's periodic requests as the kubelet's (its node status and lease
// loops use 0.04): nodes started together do not keep asking the apiserver in step.
const jitter = 0.04

// keepCurrent renews the Lease and updates the status of the registered Node until ctx ends,
// each on a loop of its own: a slow status update (many images, a slow apiserver) never delays
// the Lease, whose lapse marks the node NotReady.
func (m *Manager) keepCurrent(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() {
		// The Lease is renewed at once: registration made none.
		wait.JitterUntilWithContext(ctx, func(ctx context.Context) {
			if err := m.RenewLease(ctx); err != nil {
				m.Log.Warn("renew lease", "err", err)
			}
		}, m.LeaseRenewInterval, jitter, true)
	})
	wg.Go(func() { m.untilReady(ctx) })
	m.syncPodCIDR(ctx)
	// Registration has just written the status: the first update waits a period.
	select {
	case <-ctx.Done():
	case <-time.After(wait.Jitter(m.StatusUpdateFrequency, jitter)):
		wait.JitterUntilWithContext(ctx, func(ctx context.Context) {
			if err := m.UpdateStatus(ctx); err != nil {
				m.Log.Warn("update node status", "err", err)
			}
			m.syncPodCIDR(ctx)
		}, m.StatusUpdateFrequency, jitter, true)
	}
	wg.Wait()
}

// readyGracePeriod is the kubelet's nodeReadyGracePeriod: for this long after registration a
// node not yet Ready posts its status as soon as it would be (the kubelet's fastStatusUpdateOnce),
// not at the next period.
const readyGracePeriod = 120 * time.Second

// fastReadyInterval is how often, meanwhile, the runtime is asked whether the node is ready:
// the kubelet's 100 ms.
const fastReadyInterval = 100 * time.Millisecond

// untilReady posts the status the moment the runtime (the Ready condition's input) turns ready
// after registration, handing it the pod CIDR as soon as the Node has one (a runtime's network
// may wait for it, as a cluster's CNI configuration does). It asks the apiserver nothing while
// the node stays NotReady, and ends once the Node is posted Ready or after readyGracePeriod.
func (m *Manager) untilReady(ctx context.Context) {
	deadline := m.now().Add(readyGracePeriod)
	t := time.NewTicker(fastReadyInterval)
	defer t.Stop()
	for !m.postedReady() {
		m.syncPodCIDR(ctx)
		if ready, _, _, _ := m.runtimeStatus(ctx); ready {
			if err := m.UpdateStatus(ctx); err != nil {
				m.Log.Warn("update node status", "err", err)
			} else if m.postedReady() {
				m.Log.Info("node status posted as soon as the node became ready", "node", m.NodeName)
				return
			}
		}
		if !m.now().Before(deadline) {
			m.Log.Warn("node not becoming ready in time after startup", "node", m.NodeName)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// postedReady: the Node as last posted says Ready.
func (m *Manager) postedReady() bool {
	n, ok := m.Node()
	if !ok {
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == v1.NodeReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}
