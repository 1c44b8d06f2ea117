// Package gc runs the node's garbage collectors beside the SyncLoop, never in it (each may take a
// while), as the kubelet's StartGarbageCollection and its cleanup of orphaned pod folders do:
// folders of pods gone every housekeeping period, dead containers every minute (with a fresh look
// at the images in use), unused images every five minutes. The collectors themselves live in
// containergc and images; this package only schedules them and reports what they did.
//
// Nothing counts as deleted before every pod source has spoken (Deps.Gone): after a restart, pods
// not yet announced again are not orphans.
package gc

import (
	"context"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/containergc"
	"github.com/nodelet/nodelet/agent/images"
	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// The kubelet's periods for its garbage collectors.
const (
	DefaultContainerPeriod = time.Minute
	DefaultImagePeriod     = 5 * time.Minute
)

// Periods say how often each collector runs; tests shorten them. Zero is the kubelet's period;
// PodDirs has none of its own and must be given (the housekeeping period).
type Periods struct {
	PodDirs, Containers, Images time.Duration
}

// Containers collects dead containers and sandboxes (*containergc.GC).
type Containers interface {
	Collect(ctx context.Context) (containergc.Stats, error)
}

// Images collects unused images (*images.ImageGC).
type Images interface {
	Detect(ctx context.Context) error
	GarbageCollect(ctx context.Context) (images.GCResult, error)
}

// RuntimePods lists the pods the runtime holds (*kuberuntime.Manager).
type RuntimePods interface {
	GetPods(ctx context.Context) ([]*kubecontainer.RuntimePod, error)
}

// PodDirs removes the pods/<uid> folders keep does not keep (*volumemanager.Manager).
type PodDirs interface {
	CleanupOrphans(keep func(types.UID) bool) ([]types.UID, error)
}

// UserNamespaces frees the user namespace ranges of pods keep does not keep (*userns.Manager).
type UserNamespaces interface {
	CleanupOrphans(keep func(types.UID) bool) error
}

// Deps are the collectors and what they ask.
type Deps struct {
	Containers Containers
	Images     Images
	Runtime    RuntimePods
	PodDirs    PodDirs
	Userns     UserNamespaces
	// Gone reports a pod deleted for good (podstate.View.Gone).
	Gone func(types.UID) bool
	// Node is the reference image GC failures are recorded on.
	Node     *v1.ObjectReference
	Recorder EventRecorder
	Log      *slog.Logger
}

// Runner runs the collectors.
type Runner struct {
	periods Periods
	deps    Deps
}

// New schedules the collectors of d.
func New(p Periods, d Deps) *Runner {
	if p.Containers == 0 {
		p.Containers = DefaultContainerPeriod
	}
	if p.Images == 0 {
		p.Images = DefaultImagePeriod
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	return &Runner{periods: p, deps: d}
}

// Run collects until ctx ends.
func (r *Runner) Run(ctx context.Context) {
	outcome := imageGCOutcome{node: r.deps.Node, recorder: r.deps.Recorder}
	vt, ct, it := time.NewTicker(r.periods.PodDirs), time.NewTicker(r.periods.Containers), time.NewTicker(r.periods.Images)
	defer vt.Stop()
	defer ct.Stop()
	defer it.Stop()
	log := r.deps.Log
	for {
		select {
		case <-ctx.Done():
			return
		case <-vt.C:
			r.cleanupOrphanedPodDirs(ctx)
		case <-ct.C:
			if st, err := r.deps.Containers.Collect(ctx); err != nil {
				log.Warn("container gc", "err", err)
			} else if st != (containergc.Stats{}) {
				log.Info("container gc", "containers", st.Containers, "sandboxes", st.Sandboxes, "logDirs", st.LogDirs)
			}
			if err := r.deps.Images.Detect(ctx); err != nil {
				log.Warn("image gc: detect images", "err", err)
			}
		case <-it.C:
			res, err := r.deps.Images.GarbageCollect(ctx)
			if len(res.Removed) > 0 {
				log.Info("image gc", "usagePercent", res.UsagePercent, "removed", len(res.Removed), "freedBytes", res.Freed)
			}
			if err != nil {
				log.Warn("image gc", "err", err)
			}
			outcome.record(err)
		}
	}
}

// cleanupOrphanedPodDirs removes pods/<uid> of pods gone whose sandboxes the runtime no longer
// has, and frees their user namespace ranges. The runtime is asked only when some folder or range
// belongs to a pod gone for good: on a node whose pods all live, a housekeeping pass lists nothing.
func (r *Runner) cleanupOrphanedPodDirs(ctx context.Context) {
	var inRuntime map[types.UID]bool
	listed, away := false, false
	keep := func(uid types.UID) bool {
		if !r.deps.Gone(uid) {
			return true
		}
		if !listed {
			listed = true
			rps, err := r.deps.Runtime.GetPods(ctx)
			away = err != nil // the runtime is away: nothing is known to be gone
			inRuntime = make(map[types.UID]bool, len(rps))
			for _, rp := range rps {
				inRuntime[rp.ID] = true
			}
		}
		return away || inRuntime[uid]
	}
	removed, err := r.deps.PodDirs.CleanupOrphans(keep)
	for _, uid := range removed {
		r.deps.Log.Info("removed orphaned pod folder", "uid", uid)
	}
	if err != nil {
		r.deps.Log.Warn("orphaned pod folders", "err", err)
	}
	if err := r.deps.Userns.CleanupOrphans(keep); err != nil {
		r.deps.Log.Warn("orphaned pod user namespace allocations", "err", err)
	}
}
