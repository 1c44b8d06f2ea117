package agent

import (
	"context"
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/containergc"
	"github.com/nodelet/nodelet/agent/images"
	"github.com/nodelet/nodelet/agent/nodestatus"
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
func (a *Agent) runGC(ctx context.Context, p gcPeriods) {
	gone := a.state.Gone
	cgc := a.containerGC(gone, containergc.Policy{MinAge: a.cfg.MinimumContainerTTL,
		MaxPerPodContainer: a.cfg.MaxPerPodContainer, MaxContainers: a.cfg.MaxContainers})
	outcome := imageGCOutcome{node: nodestatus.Ref(a.cfg.NodeName), recorder: a.events}
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
			a.imageGCMu.Lock()
			res, err := a.imageGC.GarbageCollect(ctx)
			a.imageGCMu.Unlock()
			if len(res.Removed) > 0 {
				a.log.Info("image gc", "usagePercent", res.UsagePercent, "removed", len(res.Removed), "freedBytes", res.Freed)
			}
			if err != nil {
				a.log.Warn("image gc", "err", err)
			}
			outcome.record(err)
		}
	}
}

// nodeEventRecorder records events on the node (record.EventRecorder).
type nodeEventRecorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// imageGCOutcome turns failed image collections into the node events the kubelet records:
// FreeDiskSpaceFailed each time a collection could not free enough, ImageGCFailed when one fails
// right after another failed (a single failure may be a pull racing the collection).
type imageGCOutcome struct {
	node     *v1.ObjectReference
	recorder nodeEventRecorder
	failed   bool
}

func (o *imageGCOutcome) record(err error) {
	if err == nil {
		o.failed = false
		return
	}
	if errors.Is(err, images.ErrNotEnoughFreed) {
		o.recorder.Eventf(o.node, v1.EventTypeWarning, "FreeDiskSpaceFailed", "%v", err)
	}
	if o.failed {
		o.recorder.Eventf(o.node, v1.EventTypeWarning, "ImageGCFailed", "%v", err)
	}
	o.failed = true
}

func (a *Agent) containerGC(gone func(types.UID) bool, p containergc.Policy) *containergc.GC {
	return &containergc.GC{Runtime: a.runtime, Pods: podsFunc(gone), PodLogsDir: a.cfg.PodLogsDir, Log: a.log, Policy: p}
}

// deleteDeadContainers is the eviction manager's node-level reclaim of disk: a container GC now
// rather than at its next minute. It keeps the configured policy, as the kubelet's does: the last
// dead container of each is what restart counts and back-off are read from.
func (a *Agent) deleteDeadContainers(ctx context.Context) error {
	cgc := a.containerGC(a.state.Gone, containergc.Policy{MinAge: a.cfg.MinimumContainerTTL,
		MaxPerPodContainer: a.cfg.MaxPerPodContainer, MaxContainers: a.cfg.MaxContainers})
	st, err := cgc.Collect(ctx)
	if st != (containergc.Stats{}) {
		a.log.Info("eviction: removed dead containers", "containers", st.Containers, "sandboxes", st.Sandboxes, "logDirs", st.LogDirs)
	}
	return err
}

// deleteUnusedImages is the eviction manager's other reclaim: every unused image old enough goes,
// whatever the image GC thresholds say. The policy is swapped under imageGCMu so the periodic
// collection never runs with it.
func (a *Agent) deleteUnusedImages(ctx context.Context) error {
	a.imageGCMu.Lock()
	defer a.imageGCMu.Unlock()
	keep := a.imageGC.Policy
	a.imageGC.Policy = images.GCPolicy{MinAge: keep.MinAge}
	defer func() { a.imageGC.Policy = keep }()
	res, err := a.imageGC.GarbageCollect(ctx)
	if len(res.Removed) > 0 {
		a.log.Info("eviction: removed unused images", "removed", len(res.Removed), "freedBytes", res.Freed)
	}
	if errors.Is(err, images.ErrNotEnoughFreed) {
		return nil // it asked for everything; what could go went
	}
	return err
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
	keep := func(uid types.UID) bool { return inRuntime[uid] || !gone(uid) }
	removed, err := a.vols.CleanupOrphans(keep)
	for _, uid := range removed {
		a.log.Info("removed orphaned pod folder", "uid", uid)
	}
	if err != nil {
		a.log.Warn("orphaned pod folders", "err", err)
	}
	if err := a.userns.CleanupOrphans(keep); err != nil {
		a.log.Warn("orphaned pod user namespace allocations", "err", err)
	}
}

type podsFunc func(types.UID) bool

func (f podsFunc) Deleted(uid types.UID) bool { return f(uid) }

func imageGCPolicy(high, low int, minAge time.Duration) images.GCPolicy {
	return images.GCPolicy{HighThresholdPercent: high, LowThresholdPercent: low, MinAge: minAge}
}
