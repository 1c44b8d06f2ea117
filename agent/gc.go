package agent

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/containergc"
	"github.com/nodelet/nodelet/agent/images"
	"github.com/nodelet/nodelet/agent/podworkers"
)

// The kubelet's periods for its garbage collectors.
const (
	containerGCPeriod = time.Minute
	imageGCPeriod     = 5 * time.Minute
)

// gcPeriods may be shortened by tests.
type gcPeriods struct {
	volumes, containers, images time.Duration
}

// runGC runs the collectors beside the SyncLoop, never in it (each may take a while): orphaned pod
// folders every housekeeping period, dead containers every minute, unused images every five minutes.
// Nothing counts as deleted before every pod source has spoken: after a restart, pods not yet
// re-announced are not orphans.
func (a *Agent) runGC(ctx context.Context, workers *podworkers.PodWorkers, sourcesReady func() bool, p gcPeriods) {
	gone := func(uid types.UID) bool {
		if !sourcesReady() {
			return false
		}
		if _, ok := a.pods.GetPodByUID(uid); ok {
			return false
		}
		return !workers.CouldHaveRunningContainers(uid)
	}
	cgc := &containergc.GC{Runtime: a.runtime, Pods: podsFunc(gone), PodLogsDir: a.cfg.PodLogsDir, Log: a.log,
		Policy: containergc.Policy{MinAge: a.cfg.MinimumContainerTTL, MaxPerPodContainer: a.cfg.MaxPerPodContainer, MaxContainers: a.cfg.MaxContainers}}
	vt, ct, it := time.NewTicker(p.volumes), time.NewTicker(p.containers), time.NewTicker(p.images)
	defer vt.Stop()
	defer ct.Stop()
	defer it.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-vt.C:
			a.cleanupOrphanedPodDirs(ctx, gone)
		case <-ct.C:
			if st, err := cgc.Collect(ctx); err != nil {
				a.log.Warn("container gc", "err", err)
			} else if st != (containergc.Stats{}) {
				a.log.Info("container gc", "containers", st.Containers, "sandboxes", st.Sandboxes, "logDirs", st.LogDirs)
			}
			if err := a.imageGC.Detect(ctx); err != nil {
				a.log.Warn("image gc: detect images", "err", err)
			}
		case <-it.C:
			res, err := a.imageGC.GarbageCollect(ctx)
			if len(res.Removed) > 0 {
				a.log.Info("image gc", "usagePercent", res.UsagePercent, "removed", len(res.Removed), "freedBytes", res.Freed)
			}
			if err != nil {
				a.log.Warn("image gc", "err", err)
			}
		}
	}
}

// cleanupOrphanedPodDirs removes pods/<uid> of pods gone whose sandboxes the runtime no longer has.
func (a *Agent) cleanupOrphanedPodDirs(ctx context.Context, gone func(types.UID) bool) {
	rps, err := a.manager.GetPods(ctx)
	if err != nil {
		return // the runtime is away: nothing is known to be gone
	}
	inRuntime := map[types.UID]bool{}
	for _, rp := range rps {
		inRuntime[rp.ID] = true
	}
	removed, err := a.vols.CleanupOrphans(func(uid types.UID) bool { return inRuntime[uid] || !gone(uid) })
	for _, uid := range removed {
		a.log.Info("removed orphaned pod folder", "uid", uid)
	}
	if err != nil {
		a.log.Warn("orphaned pod folders", "err", err)
	}
}

type podsFunc func(types.UID) bool

func (f podsFunc) Deleted(uid types.UID) bool { return f(uid) }

func imageGCPolicy(high, low int, minAge time.Duration) images.GCPolicy {
	return images.GCPolicy{HighThresholdPercent: high, LowThresholdPercent: low, MinAge: minAge}
}
