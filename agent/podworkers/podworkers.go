// Package podworkers runs one goroutine per pod, so a slow pod (an image pull, a long grace period)
// never holds up the SyncLoop or another pod.
//
// A pod's life as its worker sees it:
//
//	UpdatePod(Create) ─► syncing ──SyncPod───► (repeat on every update, PLEG event, tick, retry)
//	                        │
//	                        │ UpdatePod(Kill) (deleted from its source, or DeletionTimestamp set),
//	                        │ or SyncPod reports the pod terminal (Succeeded/Failed)
//	                        ▼
//	                     terminating ──SyncTerminatingPod──► containers stopped with the grace period
//	                        │
//	                        ▼
//	                     terminated ──SyncTerminatedPod───► (deleted pods) containers and sandboxes removed
//	                        │
//	                        ▼
//	                     finished: the goroutine exits; the record stays until SyncKnownPods drops it
//
// Updates that arrive while the worker is busy coalesce: only the newest pod spec is kept, and a kill
// request (with the shortest grace period asked for) is never lost. A kill cancels a sync in flight.
// A pod re-added with the same UID after it was deleted (a static pod file put back) waits for the old
// worker to finish, then gets a fresh worker.
//
// Predicates used elsewhere: IsPodTerminationRequested (kill asked), CouldHaveRunningContainers (not
// yet past terminating), IsPodKnownFinished.
package podworkers

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/metrics"
)

// UpdateType says why a worker is woken.
type UpdateType int

const (
	SyncPodSync UpdateType = iota
	SyncPodUpdate
	SyncPodCreate
	SyncPodKill
)

func (u UpdateType) String() string {
	return [...]string{"sync", "update", "create", "kill"}[u]
}

// UpdatePodOptions is one update for one pod.
type UpdatePodOptions struct {
	UpdateType UpdateType
	Pod        *v1.Pod
	MirrorPod  *v1.Pod
	// RunningPod is set instead of Pod for an orphan found in the runtime (only with SyncPodKill).
	RunningPod *kubecontainer.RuntimePod
	// GracePeriodOverride shortens the grace period of a kill.
	GracePeriodOverride *int64
	// Evict marks a kill that is not a deletion (the eviction manager's): the pod stays in its
	// source as a failed pod, so what it leaves is kept as for a pod that ended by itself.
	Evict bool
}

// PodSyncer does the work; the workers only decide when.
type PodSyncer interface {
	// SyncPod drives a running pod toward its spec. isTerminal means the pod has finished for good.
	SyncPod(ctx context.Context, updateType UpdateType, pod, mirrorPod *v1.Pod) (isTerminal bool, err error)
	// SyncTerminatingPod stops every container with the grace period.
	SyncTerminatingPod(ctx context.Context, pod *v1.Pod, gracePeriod *int64) error
	// SyncTerminatingRuntimePod stops and removes an orphan that has no spec.
	SyncTerminatingRuntimePod(ctx context.Context, pod *kubecontainer.RuntimePod) error
	// SyncTerminatedPod cleans up; deleted says the pod is gone from its source (remove everything),
	// rather than merely finished (keep its containers for logs).
	SyncTerminatedPod(ctx context.Context, pod *v1.Pod, deleted bool) error
}

// Defaults.
const (
	// defaultRetry is when a failed sync runs again unless the error says otherwise.
	defaultRetry = 2 * time.Second
	maxRetry     = 10 * time.Second
)

type phase int

const (
	phaseSyncing phase = iota
	phaseTerminating
	phaseTerminated
	phaseFinished
)

type podWorker struct {
	uid        types.UID
	wake       chan struct{}
	pending    *UpdatePodOptions
	pod        *v1.Pod
	mirror     *v1.Pod
	runningPod *kubecontainer.RuntimePod
	phase      phase
	deleted    bool
	grace      *int64
	cancelSync context.CancelFunc
	running    bool // the goroutine is alive
	// restart is a Create that arrived while the pod was still terminating.
	restart *UpdatePodOptions
}

// PodWorkers owns the workers.
type PodWorkers struct {
	// ctx is every worker's parent; Run cancels it when its own context ends.
	ctx    context.Context
	stop   context.CancelFunc
	syncer PodSyncer
	log    *slog.Logger
	retry  time.Duration

	// Phases holds the workers themselves, under its lock; its predicates are the workers'.
	*Phases
	wg sync.WaitGroup
}

// Phases is the record of each pod's worker and where it is in the pod's life. The workers write
// it; other parts read its predicates. It is made apart from the workers so that those parts can
// be built before the syncer the workers drive (which needs some of them).
type Phases struct {
	mu      sync.Mutex
	workers map[types.UID]*podWorker
}

// NewPhases makes an empty record.
func NewPhases() *Phases { return &Phases{workers: map[types.UID]*podWorker{}} }

// New makes the workers, recording them in phases (nil: a record of their own): UpdatePod starts a
// pod's worker, Run's end stops them all.
func New(syncer PodSyncer, phases *Phases, log *slog.Logger) *PodWorkers {
	if log == nil {
		log = slog.Default()
	}
	if phases == nil {
		phases = NewPhases()
	}
	ctx, stop := context.WithCancel(context.Background())
	return &PodWorkers{ctx: ctx, stop: stop, syncer: syncer, log: log, retry: defaultRetry, Phases: phases}
}

// Run waits for ctx to end, then cancels every worker's sync and returns once all have returned.
func (p *PodWorkers) Run(ctx context.Context) {
	<-ctx.Done()
	p.stop()
	p.wg.Wait()
}

func uidOf(o UpdatePodOptions) types.UID {
	if o.Pod != nil {
		return o.Pod.UID
	}
	if o.RunningPod != nil {
		return o.RunningPod.ID
	}
	return ""
}

// UpdatePod hands an update to the pod's worker and returns at once.
func (p *PodWorkers) UpdatePod(o UpdatePodOptions) {
	uid := uidOf(o)
	if uid == "" {
		return
	}
	if o.Pod != nil && o.UpdateType != SyncPodKill {
		// Starts the pod's clock for kubelet_pod_start_duration_seconds and the start SLI.
		metrics.PodStarts.ObservedPod(o.Pod)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[uid]
	if !ok {
		if o.UpdateType == SyncPodKill && o.Pod == nil && o.RunningPod == nil {
			return
		}
		w = &podWorker{uid: uid, wake: make(chan struct{}, 1)}
		p.workers[uid] = w
	}
	if w.phase == phaseFinished {
		switch {
		case o.UpdateType == SyncPodCreate && w.deleted:
			w = &podWorker{uid: uid, wake: make(chan struct{}, 1)}
			p.workers[uid] = w
		case o.UpdateType == SyncPodKill && !w.deleted && o.RunningPod == nil && !o.Evict:
			// A finished pod that is now deleted: remove what it left.
			w.deleted, w.phase = true, phaseTerminated
		default:
			return
		}
	} else if w.phase != phaseSyncing && o.UpdateType == SyncPodCreate && w.deleted {
		w.restart = &o
		return
	}
	wasSyncing := w.phase == phaseSyncing
	w.merge(o)
	// A kill cuts short a sync in progress (an image pull may take minutes), but never a termination
	// already under way: repeated kill requests just coalesce.
	if o.UpdateType == SyncPodKill && wasSyncing && w.cancelSync != nil {
		w.cancelSync()
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
	if !w.running {
		w.running = true
		p.wg.Add(1)
		go p.run(w)
	}
}

// merge folds o into the pending update: the newest spec wins, a kill sticks.
func (w *podWorker) merge(o UpdatePodOptions) {
	if o.Pod != nil {
		w.pod = o.Pod
	}
	if o.MirrorPod != nil {
		w.mirror = o.MirrorPod
	}
	if o.RunningPod != nil {
		w.runningPod = o.RunningPod
	}
	if o.UpdateType == SyncPodKill {
		if w.phase == phaseSyncing {
			w.phase = phaseTerminating
		}
		if !o.Evict {
			w.deleted = true
		}
		if g := o.GracePeriodOverride; g != nil && (w.grace == nil || *g < *w.grace) {
			w.grace = g
		}
	}
	if w.pending == nil || o.UpdateType > w.pending.UpdateType {
		w.pending = &o
	}
}

func (p *PodWorkers) run(w *podWorker) {
	defer p.wg.Done()
	var retry *time.Timer
	for {
		var retryC <-chan time.Time
		if retry != nil {
			retryC = retry.C
		}
		select {
		case <-p.ctx.Done():
			return
		case <-w.wake:
		case <-retryC:
		}
		if retry != nil {
			retry.Stop()
			retry = nil
		}
		after, done := p.step(w)
		if done {
			return
		}
		if after > 0 {
			retry = time.NewTimer(after)
		}
	}
}

// step runs one sync for the worker's current phase. It returns when to retry (0: wait for an update)
// and whether the goroutine should exit.
func (p *PodWorkers) step(w *podWorker) (time.Duration, bool) {
	p.mu.Lock()
	upd := w.pending
	w.pending = nil
	ph, pod, mirror, running, grace, deleted := w.phase, w.pod, w.mirror, w.runningPod, w.grace, w.deleted
	ctx, cancel := context.WithCancel(p.ctx)
	w.cancelSync = cancel
	p.mu.Unlock()
	defer cancel()

	updateType := SyncPodSync
	if upd != nil {
		updateType = upd.UpdateType
	}
	var err error
	switch ph {
	case phaseSyncing:
		var terminal bool
		began := time.Now()
		terminal, err = p.syncer.SyncPod(ctx, updateType, pod, mirror)
		metrics.ObservePodWorker(updateType.String(), time.Since(began))
		if err == nil && terminal {
			p.advance(w, phaseSyncing, phaseTerminating)
			return 0, false
		}
		if errors.Is(err, context.Canceled) && p.ctx.Err() == nil {
			return 0, false // a kill cancelled it; the wake is already queued
		}
	case phaseTerminating:
		if pod == nil && running != nil {
			err = p.syncer.SyncTerminatingRuntimePod(ctx, running)
			if err == nil {
				p.advance(w, phaseTerminating, phaseFinished)
			}
		} else {
			err = p.syncer.SyncTerminatingPod(ctx, pod, grace)
			if err == nil {
				p.advance(w, phaseTerminating, phaseTerminated)
			}
		}
	case phaseTerminated:
		err = p.syncer.SyncTerminatedPod(ctx, pod, deleted)
		if err == nil {
			p.advance(w, phaseTerminated, phaseFinished)
		}
	}
	if err != nil {
		if p.ctx.Err() != nil {
			return 0, true
		}
		p.log.Warn("pod sync failed", "pod", w.uid, "phase", ph, "err", err)
		return retryAfter(err, p.retry), false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.phase != phaseFinished {
		return 0, false
	}
	if w.restart != nil {
		next := *w.restart
		p.log.Info("pod re-added after deletion; starting a fresh worker", "pod", w.uid)
		nw := &podWorker{uid: w.uid, wake: make(chan struct{}, 1), running: true}
		p.workers[w.uid] = nw
		nw.merge(next)
		nw.wake <- struct{}{}
		p.wg.Add(1)
		go p.run(nw)
	}
	w.running = false
	return 0, true
}

// advance moves the worker on unless a concurrent update moved it already, and wakes it for the next phase.
func (p *PodWorkers) advance(w *podWorker, from, to phase) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.phase == from {
		w.phase = to
	} else if from == phaseSyncing && w.phase == phaseTerminating {
		return
	}
	if to != phaseFinished {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

func retryAfter(err error, def time.Duration) time.Duration {
	var hint interface{ RetryAfter() time.Duration }
	if errors.As(err, &hint) && hint.RetryAfter() > 0 {
		if d := hint.RetryAfter(); d < maxRetry {
			return d
		}
		return maxRetry
	}
	return def
}

// SyncKnownPods forgets finished workers of pods no longer desired, so their UIDs may be used again.
func (p *PodWorkers) SyncKnownPods(desired map[types.UID]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for uid, w := range p.workers {
		if !desired[uid] && w.phase == phaseFinished && !w.running {
			delete(p.workers, uid)
		}
	}
}

// IsPodTerminationRequested reports whether the pod is being or has been killed.
func (p *Phases) IsPodTerminationRequested(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[uid]
	return ok && w.phase != phaseSyncing
}

// CouldHaveRunningContainers reports whether the pod's containers may still run.
func (p *Phases) CouldHaveRunningContainers(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[uid]
	return ok && (w.phase == phaseSyncing || w.phase == phaseTerminating)
}

// IsPodKnownFinished reports whether the worker has finished with the pod.
func (p *Phases) IsPodKnownFinished(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[uid]
	return ok && w.phase == phaseFinished
}

// Known reports whether any worker record exists for the pod.
func (p *Phases) Known(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.workers[uid]
	return ok
}
