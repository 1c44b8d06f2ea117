package eviction

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// The kubelet's defaults.
const (
	DefaultMonitoringInterval       = 10 * time.Second
	DefaultPressureTransitionPeriod = 5 * time.Minute
	// hardEvictionGracePeriod is what a pod evicted for a hard threshold gets: the kubelet gives one
	// second, since zero would mean "the pod's own" to the kill path.
	hardEvictionGracePeriod int64 = 1
)

// Condition reasons and messages, as the kubelet's node status writes them.
const (
	reasonMemoryPressure   = "KubeletHasInsufficientMemory"
	messageMemoryPressure  = "kubelet has insufficient memory available"
	reasonMemoryOK         = "KubeletHasSufficientMemory"
	messageMemoryOK        = "kubelet has sufficient memory available"
	reasonDiskPressure     = "KubeletHasDiskPressure"
	messageDiskPressure    = "kubelet has disk pressure"
	reasonDiskOK           = "KubeletHasNoDiskPressure"
	messageDiskOK          = "kubelet has no disk pressure"
	reasonPIDPressure      = "KubeletHasInsufficientPID"
	messagePIDPressure     = "kubelet has insufficient PID available"
	reasonPIDOK            = "KubeletHasSufficientPID"
	messagePIDOK           = "kubelet has sufficient PID available"
	ReasonEvicted          = "Evicted"
	reasonThresholdMet     = "EvictionThresholdMet"
	nodeLowMessageFmt      = "The node was low on resource: %v. "
	thresholdMetMessageFmt = "Threshold quantity: %v, available: %v. "
	containerMessageFmt    = "Container %s was using %s, request is %s, has larger consumption of %v. "
	nodeConditionMessage   = "The node had condition: %v. "
)

// KillFunc stops an evicted pod through its pod worker with the grace period, leaving it Failed with
// reason Evicted and message.
type KillFunc func(pod *v1.Pod, gracePeriod int64, message string) error

// Recorder records events (record.EventRecorder).
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// Config is what New needs beyond the thresholds.
type Config struct {
	Thresholds               []Threshold
	PressureTransitionPeriod time.Duration
	MaxPodGracePeriodSeconds int64
	// MonitoringInterval is how often signals are read; 0 is the kubelet's 10s.
	MonitoringInterval time.Duration
	NodeName           string
	// KernelMemcgNotification wakes the manager when a memory signal crosses its highest
	// threshold (Deps.Notifier), besides the ticks.
	KernelMemcgNotification bool
}

// Deps are the manager's views of the rest of the agent.
type Deps struct {
	Measurer Measurer
	Stats    PodStats
	// ActivePods are the pods that may still run: eviction candidates.
	ActivePods func() []*v1.Pod
	Kill       KillFunc
	// DeleteDeadContainers and DeleteUnusedImages free node-level disk before pods are evicted.
	DeleteDeadContainers func(ctx context.Context) error
	DeleteUnusedImages   func(ctx context.Context) error
	Recorder             Recorder
	// Evicted counts an eviction by signal (the kubelet_evictions metric); nil counts none.
	Evicted func(signal string)
	Now     func() time.Time
	Log     *slog.Logger
	// Notifier arms kernel memory thresholds; used with Config.KernelMemcgNotification.
	Notifier MemoryNotifier
	// PodCleanedUp reports whether an evicted pod gave back what it held (containers stopped,
	// memory volumes unmounted): the next pass waits for it, as the kubelet's does, so that one
	// pod's pressure does not cost a second pod its life. Nil waits for nothing.
	PodCleanedUp func(uid types.UID) bool
	// StorageStats are the pods' storage figures for their local storage limits; nil checks none.
	StorageStats StorageStats
}

// The kubelet's wait for an evicted pod's cleanup.
const (
	podCleanupTimeout  = 30 * time.Second
	podCleanupPollFreq = time.Second
)

// MemoryNotifier arms a kernel notification for a memory signal (memory.available,
// allocatableMemory.available) falling below a level (Machine, on cgroup v1).
type MemoryNotifier interface {
	NotifyMemoryBelow(sig Signal, available int64) (*MemcgThreshold, error)
}

// Manager is the eviction manager; its exported methods are safe to call from any goroutine.
type Manager struct {
	cfg  Config
	deps Deps

	mu sync.Mutex
	// met are the thresholds met at the last pass (minimum reclaim keeps them until it is reached).
	met []Threshold
	// firstMet is when each threshold started being met, for soft grace periods.
	firstMet map[thresholdKey]time.Time
	// lastPressure is when each condition was last observed, for the transition period.
	lastPressure map[v1.NodeConditionType]time.Time
	conditions   map[v1.NodeConditionType]bool
	// observed are the conditions the last pass read a signal of: only those are claimed either
	// way (none before a first reading, none for a signal that cannot be read here).
	observed map[v1.NodeConditionType]bool
	// memCapacity is the last capacity read of each memory signal, what percentages are of.
	memCapacity map[Signal]int64
}

type thresholdKey struct {
	signal Signal
	hard   bool
}

func keyOf(t Threshold) thresholdKey { return thresholdKey{t.Signal, t.hard()} }

// New makes the manager; Run starts its loop.
func New(cfg Config, deps Deps) *Manager {
	if cfg.MonitoringInterval <= 0 {
		cfg.MonitoringInterval = DefaultMonitoringInterval
	}
	if deps.Now == nil {
		deps.Now = time.Now
	}
	if deps.Log == nil {
		deps.Log = slog.Default()
	}
	return &Manager{cfg: cfg, deps: deps, firstMet: map[thresholdKey]time.Time{}, memCapacity: map[Signal]int64{},
		lastPressure: map[v1.NodeConditionType]time.Time{}, conditions: map[v1.NodeConditionType]bool{}}
}

// Run checks the signals every monitoring interval until ctx ends, and with kernel memcg
// notification also as soon as memory crosses a memory signal's highest threshold.
func (m *Manager) Run(ctx context.Context) {
	t := time.NewTicker(m.cfg.MonitoringInterval)
	defer t.Stop()
	crossed := make(chan struct{}, 1)
	var armed []*MemcgThreshold
	disarm := func() {
		for _, th := range armed {
			th.Close()
		}
		armed = nil
	}
	defer disarm()
	var lastErr string
	for {
		lastPass := time.Now()
		if p := m.Synchronize(ctx); p != nil {
			m.waitForCleanup(ctx, p)
		}
		if m.cfg.KernelMemcgNotification && m.deps.Notifier != nil {
			// Armed again at every pass: the level follows inactive_file, as the kubelet's does.
			disarm()
			var err error
			armed, err = m.armMemory(crossed)
			if err != nil && err.Error() != lastErr {
				m.deps.Log.Warn("eviction manager: arm memory threshold notification", "err", err)
			}
			lastErr = ""
			if err != nil {
				lastErr = err.Error()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-crossed:
			m.deps.Log.Info("eviction manager: memory threshold crossed, checking signals now")
			// A cgroup hovering at the level signals again and again: a pass a second is enough.
			if wait := memcgMinInterval - time.Since(lastPass); wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
			}
		}
	}
}

// waitForCleanup waits, at most podCleanupTimeout, until the evicted pod gave back its resources.
func (m *Manager) waitForCleanup(ctx context.Context, p *v1.Pod) {
	if m.deps.PodCleanedUp == nil {
		return
	}
	deadline := time.NewTimer(podCleanupTimeout)
	defer deadline.Stop()
	poll := time.NewTicker(podCleanupPollFreq)
	defer poll.Stop()
	for !m.deps.PodCleanedUp(p.UID) {
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			m.deps.Log.Warn("eviction manager: timed out waiting for the evicted pod to be cleaned up",
				"pod", p.Namespace+"/"+p.Name, "timeout", podCleanupTimeout)
			return
		case <-poll.C:
		}
	}
	m.deps.Log.Info("eviction manager: evicted pod cleaned up", "pod", p.Namespace+"/"+p.Name)
}

// memcgMinInterval bounds how often threshold crossings make the manager check signals.
const memcgMinInterval = time.Second

// armMemory arms a notification at the highest threshold of each memory signal (the node's, and
// the pods' cgroup's); crossing one sends on crossed. Signals without a threshold or a capacity
// read yet get none.
func (m *Manager) armMemory(crossed chan<- struct{}) ([]*MemcgThreshold, error) {
	m.mu.Lock()
	capacity := maps.Clone(m.memCapacity)
	m.mu.Unlock()
	var armed []*MemcgThreshold
	var errs []error
	for _, sig := range []Signal{SignalMemoryAvailable, SignalAllocatableMemoryAvailable} {
		var level int64 = -1
		for _, t := range m.cfg.Thresholds {
			if t.Signal == sig && capacity[sig] > 0 {
				level = max(level, t.value(capacity[sig]))
			}
		}
		if level < 0 {
			continue
		}
		th, err := m.deps.Notifier.NotifyMemoryBelow(sig, level)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", sig, err))
			continue
		}
		armed = append(armed, th)
		go func() {
			if th.Wait() == nil {
				select {
				case crossed <- struct{}{}:
				default:
				}
			}
		}()
	}
	return armed, errors.Join(errs...)
}

func thresholdsMet(ts []Threshold, obs Observations, minReclaim bool) []Threshold {
	var out []Threshold
	for _, t := range ts {
		o, ok := obs[t.Signal]
		if !ok {
			continue
		}
		level := t.value(o.Capacity)
		if minReclaim {
			level += t.minReclaim(o.Capacity)
		}
		if o.Available < level {
			out = append(out, t)
		}
	}
	return out
}

func merge(a, b []Threshold) []Threshold {
	seen := map[thresholdKey]bool{}
	var out []Threshold
	for _, t := range append(append([]Threshold{}, a...), b...) {
		if !seen[keyOf(t)] {
			seen[keyOf(t)] = true
			out = append(out, t)
		}
	}
	return out
}

// Synchronize is one pass: observe, update conditions, and when a threshold is met past its grace
// period, reclaim node-level resources or evict one pod. It returns the pod evicted, if any.
func (m *Manager) Synchronize(ctx context.Context) *v1.Pod {
	obs, err := m.deps.Measurer.Measure(ctx)
	if err != nil {
		m.deps.Log.Warn("eviction manager: measure signals", "err", err)
		return nil
	}
	now := m.deps.Now()

	m.mu.Lock()
	met := merge(thresholdsMet(m.cfg.Thresholds, obs, false), thresholdsMet(m.met, obs, true))
	first := map[thresholdKey]time.Time{}
	for _, t := range met {
		at, ok := m.firstMet[keyOf(t)]
		if !ok {
			at = now
		}
		first[keyOf(t)] = at
	}
	for _, t := range met {
		m.lastPressure[conditionOf(t.Signal)] = now
	}
	for _, c := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		at, ok := m.lastPressure[c]
		// Met now, or within the transition period since: a node hovering at a threshold does not flap.
		m.conditions[c] = ok && (now.Equal(at) || now.Sub(at) < m.cfg.PressureTransitionPeriod)
	}
	m.met, m.firstMet = met, first
	for _, sig := range []Signal{SignalMemoryAvailable, SignalAllocatableMemoryAvailable} {
		if o, ok := obs[sig]; ok {
			m.memCapacity[sig] = o.Capacity
		}
	}
	m.observed = map[v1.NodeConditionType]bool{}
	for sig := range obs {
		m.observed[conditionOf(sig)] = true
	}
	var due []Threshold
	for _, t := range met {
		if now.Sub(first[keyOf(t)]) >= t.GracePeriod {
			due = append(due, t)
		}
	}
	m.mu.Unlock()

	// Pods over their own local storage limits go first, whatever the node's state.
	if evicted := m.localStorageEviction(ctx); len(evicted) > 0 {
		return evicted[0]
	}
	if len(due) == 0 {
		return nil
	}
	// Memory first, then PIDs, then disk (the kubelet's order of urgency); hard before soft.
	sort.SliceStable(due, func(i, j int) bool {
		if a, b := signalRank(due[i].Signal), signalRank(due[j].Signal); a != b {
			return a < b
		}
		return due[i].hard() && !due[j].hard()
	})
	t := due[0]
	res := resourceOf(t.Signal)
	m.deps.Log.Warn("eviction threshold met, reclaiming", "signal", t.Signal, "resource", res)
	if m.deps.Recorder != nil {
		m.deps.Recorder.Eventf(m.nodeRef(), v1.EventTypeWarning, reasonThresholdMet, "Attempting to reclaim %s", res)
	}
	if m.reclaimNodeLevel(ctx, t) {
		return nil
	}
	return m.evictOne(ctx, t, obs)
}

func signalRank(s Signal) int {
	switch s {
	case SignalMemoryAvailable, SignalAllocatableMemoryAvailable:
		return 0
	case SignalPIDAvailable:
		return 1
	}
	return 2
}

func (m *Manager) nodeRef() *v1.ObjectReference {
	return &v1.ObjectReference{Kind: "Node", Name: m.cfg.NodeName, UID: types.UID(m.cfg.NodeName)}
}

// reclaimNodeLevel frees what no pod owns (dead containers, unused images) for a disk signal and
// reports whether that was enough, minimum reclaim included.
func (m *Manager) reclaimNodeLevel(ctx context.Context, t Threshold) bool {
	if conditionOf(t.Signal) != v1.NodeDiskPressure {
		return false
	}
	for _, f := range []func(context.Context) error{m.deps.DeleteDeadContainers, m.deps.DeleteUnusedImages} {
		if f == nil {
			continue
		}
		if err := f(ctx); err != nil {
			m.deps.Log.Warn("eviction manager: reclaim node-level resources", "err", err)
		}
	}
	obs, err := m.deps.Measurer.Measure(ctx)
	if err != nil {
		return false
	}
	if len(thresholdsMet([]Threshold{t}, obs, true)) == 0 {
		m.deps.Log.Info("eviction manager: node-level reclaim was enough", "signal", t.Signal)
		return true
	}
	return false
}
