// Package qos keeps the cgroups under the pods' top cgroup as the kubelet's QoS and pod container
// managers do: <root>/burstable and <root>/besteffort with the kubelet's cpu shares (besteffort the
// minimum, burstable the sum of its pods' cpu requests, kept current as pods come and go), one
// cgroup per pod (<root>[/<qos>]/pod<uid>) made with the pod's summed limits before its sandbox
// starts, and the pod cgroups of pods that are gone found by scanning and removed. The runtime only
// gets the pod cgroup as the sandbox's cgroup parent, so this works over any CRI runtime.
package qos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodelet/nodelet/agent/cm"
	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// Class is the QoS class the pod's cgroup is placed by: the one its status already records (a
// running pod keeps its class), else the one its spec gives.
func Class(pod *v1.Pod) v1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return kubecontainer.PodQOSClass(pod)
}

// PodCgroup is the pod's cgroup: <root>/pod<uid> for Guaranteed pods, <root>/<qos>/pod<uid> for the
// others. The UID must be one path element (the agent checks it before a pod gets this far).
func PodCgroup(root string, pod *v1.Pod) string {
	tier := ""
	if q := Class(pod); q != v1.PodQOSGuaranteed {
		tier = strings.ToLower(string(q))
	}
	return cm.PodCgroups{Root: root}.Pod(tier, string(pod.UID))
}

// PodLimits are the pod cgroup's limits, as the kubelet sums them: cpu shares from the requests
// (the minimum for BestEffort); a CFS quota from the cpu limits and a memory limit from the memory
// limits, for Burstable pods only when every container declares that limit (an undeclared one is
// unbounded, so the sum would be a lie); huge pages from the requests; pidsLimit (> 0) for every pod.
func PodLimits(pod *v1.Pod, cpuPeriod uint64, pidsLimit int64) cm.Limits {
	reqs := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	cpuDeclared, memDeclared := true, true
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{
		ContainerFn: func(res v1.ResourceList, _ resourcehelper.ContainerType) {
			if res.Cpu().IsZero() {
				cpuDeclared = false
			}
			if res.Memory().IsZero() {
				memDeclared = false
			}
		},
	})
	var l cm.Limits
	if pidsLimit > 0 {
		l.Pids = &pidsLimit
	}
	for name, q := range reqs {
		if strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
			hp := cm.LimitsFor(v1.ResourceList{name: q}, false).HugePages
			if l.HugePages == nil {
				l.HugePages = map[int64]int64{}
			}
			for size, v := range hp {
				l.HugePages[size] = v
			}
		}
	}
	shares := cm.MilliCPUToShares(reqs.Cpu().MilliValue())
	quota := cm.MilliCPUToQuota(limits.Cpu().MilliValue(), cpuPeriod)
	mem := limits.Memory().Value()
	switch Class(pod) {
	case v1.PodQOSGuaranteed:
		l.CPUShares, l.CPUQuota, l.CPUPeriod, l.Memory = &shares, &quota, &cpuPeriod, &mem
	case v1.PodQOSBurstable:
		l.CPUShares = &shares
		if cpuDeclared {
			l.CPUQuota, l.CPUPeriod = &quota, &cpuPeriod
		}
		if memDeclared {
			l.Memory = &mem
		}
	default:
		min := uint64(cm.MinShares)
		l.CPUShares = &min
	}
	return l
}

// BurstableShares are the burstable cgroup's shares: the sum of its pods' cpu requests, so the
// tier as a whole competes with Guaranteed pods by what its pods asked for.
func BurstableShares(pods []*v1.Pod) uint64 {
	var milli int64
	for _, p := range pods {
		if Class(p) == v1.PodQOSBurstable {
			reqs := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
			milli += reqs.Cpu().MilliValue()
		}
	}
	return cm.MilliCPUToShares(milli)
}

// Config names the cgroups and the limits every pod gets.
type Config struct {
	// Root is the pods' top cgroup (/kubepods).
	Root string
	// PodPidsLimit (> 0) caps the processes of each pod (podPidsLimit).
	PodPidsLimit int64
	// CPUPeriod is the CFS period of the pods' quotas (cm.QuotaPeriod).
	CPUPeriod uint64
}

// Deps are what the manager reads.
type Deps struct {
	Cgroups *cm.Cgroups
	// ActivePods are the pods that should be running (not terminating, not finished).
	ActivePods func() []*v1.Pod
	// RuntimePods are the UIDs the runtime still holds a sandbox of: their cgroups are not orphans,
	// whatever the agent knows.
	RuntimePods func(ctx context.Context) (map[types.UID]bool, error)
	Log         *slog.Logger
	// Period is how often the QoS shares are refreshed and orphans looked for (the kubelet's minute).
	Period time.Duration
}

// Manager keeps the QoS and pod cgroups.
type Manager struct {
	cfg  Config
	deps Deps
	// mu orders writes to the burstable cgroup, which every pod's sync may refresh.
	mu sync.Mutex

	// applied holds the limits last written whole to each pod cgroup. A sync of a pod whose cgroup
	// exists with its limits writes nothing: the kubelet touches a pod cgroup only when it is
	// missing, and rewriting 50 pods' cgroups and the QoS tiers at each sync cost an idle node a
	// tenth of its CPU. A partial write (a resize) or a removal forgets the entry.
	appliedMu sync.Mutex
	applied   map[string]cm.Limits
}

// New makes a manager; nothing is written until Start.
func New(cfg Config, d Deps) *Manager {
	if d.Cgroups == nil {
		c := cm.HostCgroups()
		d.Cgroups = &c
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Period == 0 {
		d.Period = time.Minute
	}
	if cfg.CPUPeriod == 0 {
		cfg.CPUPeriod = cm.QuotaPeriod
	}
	return &Manager{cfg: cfg, deps: d, applied: map[string]cm.Limits{}}
}

// names names the cgroups below the pods' root.
func (m *Manager) names() cm.PodCgroups { return cm.PodCgroups{Root: m.cfg.Root} }

// UpdateQoS writes the QoS cgroups' shares (making them where missing).
func (m *Manager) UpdateQoS() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	burstable := BurstableShares(m.deps.ActivePods())
	besteffort := uint64(cm.MinShares)
	return errors.Join(
		m.deps.Cgroups.Apply(m.names().Tier("burstable"), cm.Limits{CPUShares: &burstable}),
		m.deps.Cgroups.Apply(m.names().Tier("besteffort"), cm.Limits{CPUShares: &besteffort}))
}

// EnsurePod makes (or updates) the pod's cgroup with its limits, after refreshing the QoS shares
// the pod now counts in. It runs at every sync of the pod, before its sandbox is made, and writes
// only when the cgroup is missing or its limits changed.
func (m *Manager) EnsurePod(pod *v1.Pod) error {
	name, l := PodCgroup(m.cfg.Root, pod), PodLimits(pod, m.cfg.CPUPeriod, m.cfg.PodPidsLimit)
	m.appliedMu.Lock()
	prev, ok := m.applied[name]
	m.appliedMu.Unlock()
	if ok && reflect.DeepEqual(prev, l) && m.deps.Cgroups.Exists(name) {
		return nil
	}
	if err := m.UpdateQoS(); err != nil {
		return fmt.Errorf("QoS cgroups: %w", err)
	}
	m.forget(name)
	if err := m.deps.Cgroups.Apply(name, l); err != nil {
		return fmt.Errorf("pod cgroup: %w", err)
	}
	m.appliedMu.Lock()
	m.applied[name] = l
	m.appliedMu.Unlock()
	return nil
}

// forget drops what EnsurePod knows of the cgroup, so its next call writes it whole.
func (m *Manager) forget(name string) {
	m.appliedMu.Lock()
	delete(m.applied, name)
	m.appliedMu.Unlock()
}

// podCgroups are the pod cgroups found under the root, by UID, in any hierarchy.
func (m *Manager) podCgroups() map[types.UID]string {
	out := map[types.UID]string{}
	names := m.names()
	for _, tier := range cm.QoSTiers {
		for _, d := range m.deps.Cgroups.Dirs(names.Tier(tier)) {
			ents, err := os.ReadDir(d)
			if err != nil {
				continue
			}
			for _, e := range ents {
				if uid, ok := cm.PodUID(e.Name()); ok && e.IsDir() {
					out[types.UID(uid)] = names.Pod(tier, uid)
				}
			}
		}
	}
	return out
}

// CleanupOrphans removes the cgroups of pods that are neither active nor held by the runtime. A
// cgroup that still has processes then holds nothing the runtime knows of: they are killed, as the
// kubelet kills them, and the cgroup goes at a later pass once they are gone.
func (m *Manager) CleanupOrphans(ctx context.Context) error {
	found := m.podCgroups()
	if len(found) == 0 {
		return nil
	}
	active := map[types.UID]bool{}
	for _, p := range m.deps.ActivePods() {
		active[p.UID] = true
	}
	held, err := m.deps.RuntimePods(ctx)
	if err != nil {
		return fmt.Errorf("list the runtime's pods: %w", err)
	}
	var errs []error
	for uid, name := range found {
		if active[uid] || held[uid] {
			continue
		}
		if procs := m.deps.Cgroups.Procs(name); len(procs) > 0 {
			m.deps.Log.Warn("killing processes left in an orphaned pod cgroup", "cgroup", name, "pids", procs)
			for _, pid := range procs {
				if err := unix.Kill(pid, unix.SIGKILL); err != nil && err != unix.ESRCH {
					errs = append(errs, fmt.Errorf("kill %d in %s: %w", pid, name, err))
				}
			}
			continue
		}
		m.forget(name)
		if err := m.deps.Cgroups.Remove(name); err != nil {
			errs = append(errs, err)
			continue
		}
		m.deps.Log.Info("removed orphaned pod cgroup", "cgroup", name)
	}
	return errors.Join(errs...)
}

// Run refreshes the QoS shares and removes orphaned pod cgroups every Period until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	t := time.NewTicker(m.deps.Period)
	defer t.Stop()
	for {
		if err := m.UpdateQoS(); err != nil {
			m.deps.Log.Warn("QoS cgroups", "err", err)
		}
		if err := m.CleanupOrphans(ctx); err != nil && ctx.Err() == nil {
			m.deps.Log.Warn("orphaned pod cgroups", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// PodLimits are the limits the pod's cgroup gets for the pod's resources as given (during a
// resize the runtime manager compares those of the pod as actuated and as allocated).
func (m *Manager) PodLimits(pod *v1.Pod) cm.Limits {
	return PodLimits(pod, m.cfg.CPUPeriod, m.cfg.PodPidsLimit)
}

// SetPodLimits writes the set fields of l on the pod's cgroup: a resize raises or lowers one
// limit at a time.
func (m *Manager) SetPodLimits(pod *v1.Pod, l cm.Limits) error {
	name := PodCgroup(m.cfg.Root, pod)
	m.forget(name)
	if err := m.deps.Cgroups.Apply(name, l); err != nil {
		return fmt.Errorf("pod cgroup: %w", err)
	}
	return nil
}

// PodMemoryUsage is the memory the pod's cgroup uses now, in bytes.
func (m *Manager) PodMemoryUsage(pod *v1.Pod) (int64, error) {
	return m.deps.Cgroups.MemoryUsage(PodCgroup(m.cfg.Root, pod))
}
