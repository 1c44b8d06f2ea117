package nodestatus

import (
	"context"
	"sync"
	"time"

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
