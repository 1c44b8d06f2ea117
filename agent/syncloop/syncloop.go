// Package syncloop is the agent's main loop: one select over config updates, PLEG events, probe
// results, kills (evictions), the periodic sync tick and housekeeping. Each case only routes work to
// pod workers and returns, so the loop never blocks on a runtime call (housekeeping's two list calls
// are time-boxed). Every wake-up of a pod worker comes from here. Every pass records a heartbeat
// that /healthz reads.
package syncloop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/admission"
	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/pleg"
	"github.com/nodelet/nodelet/agent/podmanager"
	"github.com/nodelet/nodelet/agent/podsource"
	"github.com/nodelet/nodelet/agent/podsync"
	"github.com/nodelet/nodelet/agent/podworkers"
	"github.com/nodelet/nodelet/agent/prober"
	"github.com/nodelet/nodelet/agent/status"
)

// Defaults as the kubelet's.
const (
	DefaultSyncFrequency      = time.Minute
	DefaultHousekeepingPeriod = 2 * time.Second
	housekeepingTimeout       = 10 * time.Second
	// heartbeatThreshold: Healthy fails when the loop has not turned for this long.
	heartbeatThreshold = 3 * time.Minute
)

// PodManager is the desired pods (*podmanager.Manager).
type PodManager interface {
	AddPod(*v1.Pod)
	UpdatePod(*v1.Pod)
	RemovePod(*v1.Pod)
	GetPods() []*v1.Pod
	GetPodByUID(types.UID) (*v1.Pod, bool)
	GetMirrorPodByPod(*v1.Pod) (*v1.Pod, bool)
	GetPodByMirrorPod(*v1.Pod) (*v1.Pod, bool)
	GetOrphanedMirrorPods() []*v1.Pod
}

// PodWorkers are the per-pod goroutines (*podworkers.PodWorkers).
type PodWorkers interface {
	UpdatePod(podworkers.UpdatePodOptions)
	SyncKnownPods(desired map[types.UID]bool)
	IsPodTerminationRequested(types.UID) bool
	CouldHaveRunningContainers(types.UID) bool
}

// RuntimePods lists what the runtime runs (*kuberuntime.Manager).
type RuntimePods interface {
	GetPods(ctx context.Context) ([]*kubecontainer.RuntimePod, error)
}

// Statuses forgets statuses of pods gone, gives the start times active deadlines count from, takes
// readiness flips as they come and fails the pods admission refused (*status.Manager).
type Statuses interface {
	RemoveOrphanedStatuses(desired map[types.UID]bool)
	SetPodStatus(pod *v1.Pod, status v1.PodStatus) bool
	GetPodStatus(uid types.UID) (v1.PodStatus, bool)
	SetContainerReadiness(uid types.UID, containerID string, ready bool, now time.Time)
}

// MirrorDeleter removes mirror pods left by static pods that are gone; nil without an apiserver.
type MirrorDeleter interface {
	DeleteMirrorPod(ctx context.Context, name, namespace string, uid *types.UID) error
}

// Resizes are the in-place resizes decided (*allocation.Manager): housekeeping forgets the pods
// gone and decides the deferred resizes again, as pods that went may have made room.
type Resizes interface {
	RemoveOrphanedPods(keep map[types.UID]bool)
	RetryPendingResizes() []*v1.Pod
}

// BackOffs are the crash-loop and image pull back-offs (*kuberuntime.Manager).
type BackOffs interface {
	GC()
}

// EventHistory keeps the events of pods for describe (*recorder.History).
type EventHistory interface {
	Forget(keep map[string]bool)
}

// Listed names ("namespace/name") every pod a source lists (*podsource.PodConfig).
type Listed interface {
	Listed() map[string]bool
}

// Admit decides whether a new pod may run; a non-nil error rejects it. An *admission.Error
// carries the status reason (SysctlForbidden…); any other error is OutOfpods.
type Admit func(pod *v1.Pod, active []*v1.Pod) error

// Deps are what the loop routes between.
type Deps struct {
	Updates <-chan podsource.PodUpdate
	PLEG    <-chan *pleg.PodLifecycleEvent
	// Probes are the prober's flipped results; nil when nothing probes.
	Probes   <-chan prober.Update
	Pods     PodManager
	Workers  PodWorkers
	Runtime  RuntimePods
	Statuses Statuses
	Mirrors  MirrorDeleter
	Admit    Admit
	// Recorder gets the events of pods admission refused; nil records none.
	Recorder     EventRecorder
	SourcesReady func() bool
	// SourceHandled hears of each update handled, after its pods were admitted: a source is
	// ready once one of its sets was (*podsource.PodConfig.SourceHandled); nil: nobody asks.
	SourceHandled func(source string)
	// Kills are the evictions to hand to workers, Evicted marks their statuses; nil: none.
	Kills   *Kills
	Evicted EvictionMarker
	// Housekeeping's chores beyond the pods themselves; each optional.
	BackOffs BackOffs
	Events   EventHistory
	Listed   Listed
	Resizes  Resizes

	SyncFrequency      time.Duration
	HousekeepingPeriod time.Duration
	Log                *slog.Logger
}

// SyncLoop is the loop.
type SyncLoop struct {
	Deps
	heartbeat atomic.Int64
}

// New makes a loop.
func New(d Deps) *SyncLoop {
	if d.SyncFrequency == 0 {
		d.SyncFrequency = DefaultSyncFrequency
	}
	if d.HousekeepingPeriod == 0 {
		d.HousekeepingPeriod = DefaultHousekeepingPeriod
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.SourcesReady == nil {
		d.SourcesReady = func() bool { return true }
	}
	l := &SyncLoop{Deps: d}
	l.heartbeat.Store(time.Now().UnixNano())
	return l
}

// Healthy fails when the loop is stuck.
func (l *SyncLoop) Healthy() error {
	last := time.Unix(0, l.heartbeat.Load())
	if since := time.Since(last); since > heartbeatThreshold {
		return fmt.Errorf("sync loop last ran %s ago; threshold is %s", since.Round(time.Second), heartbeatThreshold)
	}
	return nil
}

// LastHeartbeat is when the loop last turned.
func (l *SyncLoop) LastHeartbeat() time.Time { return time.Unix(0, l.heartbeat.Load()) }

// Run loops until ctx ends.
func (l *SyncLoop) Run(ctx context.Context) {
	syncTicker := time.NewTicker(l.SyncFrequency)
	defer syncTicker.Stop()
	housekeeping := time.NewTicker(l.HousekeepingPeriod)
	defer housekeeping.Stop()
	for l.iteration(ctx, syncTicker.C, housekeeping.C) {
		l.heartbeat.Store(time.Now().UnixNano())
	}
}

func (l *SyncLoop) iteration(ctx context.Context, syncCh, housekeepingCh <-chan time.Time) bool {
	select {
	case <-ctx.Done():
		return false
	case u, ok := <-l.Updates:
		if !ok {
			return false
		}
		l.handleUpdate(u)
		if l.SourceHandled != nil && u.Source != "" {
			l.SourceHandled(u.Source)
		}
	case e := <-l.PLEG:
		l.handlePLEGEvent(e)
	case u := <-l.Probes:
		l.handleProbeUpdate(u)
	case <-l.Kills.woken():
		l.handleKills()
	case <-syncCh:
		for _, p := range l.Pods.GetPods() {
			l.dispatch(p, podworkers.SyncPodSync)
		}
	case now := <-housekeepingCh:
		l.syncPastDeadline(now)
		if l.SourcesReady() {
			l.housekeeping(ctx)
		}
	}
	return true
}

func (l *SyncLoop) handleUpdate(u podsource.PodUpdate) {
	l.Log.Debug("pod update", "op", u.Op, "source", u.Source, "pods", len(u.Pods))
	switch u.Op {
	case podsource.ADD:
		for _, p := range u.Pods {
			if podmanager.IsMirrorPod(p) {
				l.Pods.AddPod(p)
				l.syncStaticFor(p)
				continue
			}
			// As the kubelet: a pod already terminal (rejected before an agent restart, or
			// finished) is not admitted again; its worker only cleans up after it.
			if l.Admit != nil && p.Status.Phase != v1.PodFailed && p.Status.Phase != v1.PodSucceeded {
				if err := l.Admit(p, l.Pods.GetPods()); err != nil {
					l.Log.Warn("pod rejected", "pod", kubecontainer.FormatPod(p), "err", err)
					reason, msg := admission.OutOfPods, err.Error()
					var ae *admission.Error
					if errors.As(err, &ae) {
						reason, msg = ae.Reason, ae.Message
					}
					l.reject(p, reason, msg)
					continue
				}
			}
			l.Pods.AddPod(p)
			l.dispatch(p, podworkers.SyncPodCreate)
		}
	case podsource.UPDATE, podsource.DELETE:
		for _, p := range u.Pods {
			l.Pods.UpdatePod(p)
			if podmanager.IsMirrorPod(p) {
				l.syncStaticFor(p)
				continue
			}
			l.dispatch(p, podworkers.SyncPodUpdate)
		}
	case podsource.REMOVE:
		for _, p := range u.Pods {
			l.Pods.RemovePod(p)
			if podmanager.IsMirrorPod(p) {
				l.syncStaticFor(p)
				continue
			}
			l.Workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, Pod: p})
		}
	case podsource.RECONCILE:
		for _, p := range u.Pods {
			l.Pods.UpdatePod(p)
			// A readiness gate's condition, set by someone else, reaches Ready through the pod's
			// next status: its worker makes that one now rather than at the periodic sync.
			if !podmanager.IsMirrorPod(p) && status.NeedsReadinessReconcile(p) {
				l.dispatch(p, podworkers.SyncPodSync)
			}
		}
	}
}

// syncStaticFor wakes the static pod of a mirror that changed, so a deleted or outdated mirror is recreated.
func (l *SyncLoop) syncStaticFor(mirror *v1.Pod) {
	if p, ok := l.Pods.GetPodByMirrorPod(mirror); ok {
		l.dispatch(p, podworkers.SyncPodSync)
	}
}

// dispatch hands the pod to its worker: a pod the apiserver is deleting goes to termination.
func (l *SyncLoop) dispatch(p *v1.Pod, t podworkers.UpdateType) {
	mirror, _ := l.Pods.GetMirrorPodByPod(p)
	o := podworkers.UpdatePodOptions{UpdateType: t, Pod: p, MirrorPod: mirror}
	if p.DeletionTimestamp != nil {
		o.UpdateType = podworkers.SyncPodKill
		o.GracePeriodOverride = p.DeletionGracePeriodSeconds
	}
	l.Workers.UpdatePod(o)
}

// syncPastDeadline wakes the worker of each pod whose spec.activeDeadlineSeconds has passed, so it
// fails the pod and kills its containers. The periodic sync visits a pod only every SyncFrequency
// (a minute); checked at each housekeeping pass instead, a pod ends at most a HousekeepingPeriod
// late, with no timer per pod to keep. The check reads only memory; a pod whose worker already
// terminates it is not woken again.
func (l *SyncLoop) syncPastDeadline(now time.Time) {
	for _, p := range l.Pods.GetPods() {
		if p.Spec.ActiveDeadlineSeconds == nil || l.Workers.IsPodTerminationRequested(p.UID) {
			continue
		}
		var kept v1.PodStatus
		if l.Statuses != nil {
			kept, _ = l.Statuses.GetPodStatus(p.UID)
		}
		if kept.Phase == v1.PodFailed || kept.Phase == v1.PodSucceeded {
			continue
		}
		if podsync.PastActiveDeadline(p, kept, now) {
			l.dispatch(p, podworkers.SyncPodSync)
		}
	}
}

func (l *SyncLoop) handlePLEGEvent(e *pleg.PodLifecycleEvent) {
	if e.Type == pleg.ContainerRemoved {
		return
	}
	if p, ok := l.Pods.GetPodByUID(e.ID); ok {
		l.dispatch(p, podworkers.SyncPodSync)
	}
}

// handleProbeUpdate syncs the pod whose probe flipped: its worker restarts a container that failed
// liveness or startup, and carries a readiness change into the pod's status.
func (l *SyncLoop) handleProbeUpdate(u prober.Update) {
	if u.Probe == prober.Readiness && l.Statuses != nil {
		// Published at once, as the kubelet's: a terminating pod's worker is busy with the kill.
		l.Statuses.SetContainerReadiness(u.PodUID, u.ContainerID, u.Result == prober.Success, time.Now())
	}
	if p, ok := l.Pods.GetPodByUID(u.PodUID); ok {
		l.dispatch(p, podworkers.SyncPodSync)
	}
}

// housekeeping kills what the runtime runs but nobody wants (pods removed while the agent was down,
// or whose worker was lost), drops records of finished pods, and deletes orphaned mirror pods.
func (l *SyncLoop) housekeeping(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, housekeepingTimeout)
	defer cancel()
	desired := map[types.UID]bool{}
	for _, p := range l.Pods.GetPods() {
		desired[p.UID] = true
	}
	l.Workers.SyncKnownPods(desired)
	if l.Statuses != nil {
		l.Statuses.RemoveOrphanedStatuses(desired)
	}
	if l.Runtime != nil {
		running, err := l.Runtime.GetPods(ctx)
		if err != nil {
			l.Log.Warn("housekeeping: list runtime pods", "err", err)
		}
		for _, rp := range running {
			if desired[rp.ID] || l.Workers.CouldHaveRunningContainers(rp.ID) {
				continue
			}
			l.Log.Info("housekeeping: removing pod not desired", "pod", rp.Namespace+"/"+rp.Name, "uid", rp.ID)
			l.Workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodKill, RunningPod: rp})
		}
	}
	if l.Mirrors != nil {
		for _, m := range l.Pods.GetOrphanedMirrorPods() {
			uid := m.UID
			if err := l.Mirrors.DeleteMirrorPod(ctx, m.Name, m.Namespace, &uid); err != nil {
				l.Log.Warn("housekeeping: delete orphaned mirror pod", "pod", m.Namespace+"/"+m.Name, "err", err)
			}
		}
	}
	l.housekeepChores(desired)
}

// housekeepChores trims back-offs and the events of pods gone, forgets the allocations of pods
// gone and wakes the workers of pods whose deferred resize fits now. A pod its source still lists
// keeps its events even when it was refused (and so is in no pod list): they say why it does not
// run.
func (l *SyncLoop) housekeepChores(desired map[types.UID]bool) {
	if l.BackOffs != nil {
		l.BackOffs.GC()
	}
	if l.Events != nil {
		keep := map[string]bool{}
		if l.Listed != nil {
			keep = l.Listed.Listed()
		}
		for _, p := range l.Pods.GetPods() {
			keep[p.Namespace+"/"+p.Name] = true
		}
		l.Events.Forget(keep)
	}
	if l.Resizes != nil {
		l.Resizes.RemoveOrphanedPods(desired)
		for _, p := range l.Resizes.RetryPendingResizes() {
			mirror, _ := l.Pods.GetMirrorPodByPod(p)
			l.Workers.UpdatePod(podworkers.UpdatePodOptions{UpdateType: podworkers.SyncPodSync, Pod: p, MirrorPod: mirror})
		}
	}
}
