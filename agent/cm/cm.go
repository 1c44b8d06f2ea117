package cm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodelet/nodelet/agent/eviction"
)

// Config is the node allocatable configuration, named as the KubeletConfiguration's fields.
type Config struct {
	MaxPods int
	// PodsPerCore (> 0) bounds the pods capacity further to that many per CPU.
	PodsPerCore int
	// RootDir's filesystem is the node's ephemeral-storage.
	RootDir                      string
	SystemReserved, KubeReserved v1.ResourceList
	// HardEvictionThresholds: the hard ones among them are kept from pods too.
	HardEvictionThresholds []eviction.Threshold
	// EnforceNodeAllocatable are the keys, checked by CheckEnforcement.
	EnforceNodeAllocatable []string
	// PodsCgroup is the pods' top cgroup (/kubepods); "" when the runtime places pods itself.
	PodsCgroup                               string
	SystemReservedCgroup, KubeReservedCgroup string
}

// Recorder records the node's events.
type Recorder interface {
	Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// Deps are what the manager reads and writes; zero values are this host's.
type Deps struct {
	Machine  Machine
	Cgroups  *Cgroups
	Recorder Recorder
	// Node is the reference events are recorded against.
	Node *v1.ObjectReference
	Log  *slog.Logger
	// RetryPeriod is how often a failed enforcement is retried (the kubelet's minute).
	RetryPeriod time.Duration
}

// The kubelet's event reasons for enforcement.
const (
	EventEnforced = "NodeAllocatableEnforced"
	EventFailed   = "FailedNodeAllocatableEnforcement"
)

// Manager owns the node's capacity and allocatable and the cgroups enforcing them.
type Manager struct {
	cfg  Config
	deps Deps

	mu       sync.Mutex
	capacity v1.ResourceList // the last read, kept when a later read fails
	internal v1.ResourceList
}

// New reads the machine once and refuses a configuration the node cannot hold: unknown or
// incomplete enforcement, reservations beyond capacity, a reserved cgroup to enforce on that
// does not exist.
func New(cfg Config, d Deps) (*Manager, error) {
	if d.Cgroups == nil {
		c := HostCgroups()
		d.Cgroups = &c
	}
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.RetryPeriod == 0 {
		d.RetryPeriod = time.Minute
	}
	if err := CheckEnforcement(cfg.EnforceNodeAllocatable, cfg.PodsCgroup != "", cfg.SystemReservedCgroup, cfg.KubeReservedCgroup,
		cfg.SystemReserved, cfg.KubeReserved); err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, deps: d}
	capacity, internal, err := m.machineCapacity()
	if err != nil {
		return nil, err
	}
	m.capacity, m.internal = capacity, internal
	if err := CheckReservation(capacity, Reservation(capacity, cfg.SystemReserved, cfg.KubeReserved, cfg.HardEvictionThresholds)); err != nil {
		return nil, err
	}
	for _, r := range m.reservedTargets() {
		if !d.Cgroups.Exists(r.cgroup) {
			return nil, fmt.Errorf("enforceNodeAllocatable %s: cgroup %s %w (create it, or leave %s out)", r.key, r.cgroup, errNoCgroup, r.key)
		}
	}
	return m, nil
}

// machineCapacity is the machine's, with pods bounded by podsPerCore as the kubelet bounds them.
func (m *Manager) machineCapacity() (capacity, internal v1.ResourceList, err error) {
	capacity, internal, err = m.deps.Machine.Capacity(m.cfg.MaxPods, m.cfg.RootDir)
	if err != nil || m.cfg.PodsPerCore <= 0 {
		return capacity, internal, err
	}
	cpus := capacity[v1.ResourceCPU]
	if perCore := cpus.Value() * int64(m.cfg.PodsPerCore); perCore < int64(m.cfg.MaxPods) {
		pods := *resource.NewQuantity(perCore, resource.DecimalSI)
		capacity[v1.ResourcePods], internal[v1.ResourcePods] = pods, pods
	}
	return capacity, internal, nil
}

// read refreshes the capacity (the root filesystem may grow); a failed read keeps the last one.
func (m *Manager) read() (capacity, internal v1.ResourceList) {
	c, i, err := m.machineCapacity()
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		m.deps.Log.Warn("node capacity", "err", err)
	} else {
		m.capacity, m.internal = c, i
	}
	return m.capacity.DeepCopy(), m.internal.DeepCopy()
}

// Capacity is the node's capacity as the Node reports it.
func (m *Manager) Capacity() v1.ResourceList {
	c, _ := m.read()
	return c
}

// Resources are the Node's capacity and allocatable, read together.
func (m *Manager) Resources() (capacity, allocatable v1.ResourceList) {
	c, _ := m.read()
	return c, Allocatable(c, Reservation(c, m.cfg.SystemReserved, m.cfg.KubeReserved, m.cfg.HardEvictionThresholds))
}

// Allocatable is what pods may request in total: what admission checks and the Node reports.
func (m *Manager) Allocatable() v1.ResourceList {
	_, a := m.Resources()
	return a
}

// AllocatableAbsolute is allocatable before the hard eviction thresholds are taken off (capacity
// less the reservations): the most pods could ever hold, beyond which an in-place resize is
// infeasible rather than deferred, as the kubelet judges it.
func (m *Manager) AllocatableAbsolute() v1.ResourceList {
	c, _ := m.read()
	return Allocatable(c, Reservation(c, m.cfg.SystemReserved, m.cfg.KubeReserved, nil))
}

func (m *Manager) enforces(key string) bool {
	return slices.Contains(m.cfg.EnforceNodeAllocatable, key)
}

type reservedTarget struct {
	key, cgroup  string
	reserved     v1.ResourceList
	compressible bool
}

func (m *Manager) reservedTargets() []reservedTarget {
	var out []reservedTarget
	for _, t := range []reservedTarget{
		{EnforceSystemReserved, m.cfg.SystemReservedCgroup, m.cfg.SystemReserved, false},
		{EnforceSystemReservedCompressible, m.cfg.SystemReservedCgroup, m.cfg.SystemReserved, true},
		{EnforceKubeReserved, m.cfg.KubeReservedCgroup, m.cfg.KubeReserved, false},
		{EnforceKubeReservedCompressible, m.cfg.KubeReservedCgroup, m.cfg.KubeReserved, true},
	} {
		if m.enforces(t.key) {
			out = append(out, t)
		}
	}
	return out
}

// Enforce writes the limits once: the pods' cgroup always gets them (at capacity when "pods" is not
// enforced, since a new cgroup's default cpu.shares of 1024 would starve pods next to busy system
// cgroups), and each enforced reservation goes on its cgroup.
func (m *Manager) Enforce() error {
	var errs []error
	if m.cfg.PodsCgroup != "" {
		_, internal := m.read()
		l := LimitsFor(PodsLimits(internal, m.cfg.SystemReserved, m.cfg.KubeReserved, m.enforces(EnforcePods)), false)
		if err := m.deps.Cgroups.Apply(m.cfg.PodsCgroup, l); err != nil {
			errs = append(errs, fmt.Errorf("pods cgroup: %w", err))
		}
	}
	for _, r := range m.reservedTargets() {
		if !m.deps.Cgroups.Exists(r.cgroup) {
			errs = append(errs, fmt.Errorf("%s cgroup %s %w", r.key, r.cgroup, errNoCgroup))
			continue
		}
		if err := m.deps.Cgroups.Apply(r.cgroup, LimitsFor(r.reserved, r.compressible)); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.key, err))
		}
	}
	return errors.Join(errs...)
}

// Run enforces the limits, and while that fails (a memory limit below what pods already use, until
// eviction frees some) retries every RetryPeriod, recording the outcome as the kubelet does.
func (m *Manager) Run(ctx context.Context) {
	if m.cfg.PodsCgroup == "" && len(m.reservedTargets()) == 0 {
		return
	}
	for {
		err := m.Enforce()
		if err == nil {
			m.event(v1.EventTypeNormal, EventEnforced, "Updated Node Allocatable limit across pods")
			return
		}
		m.deps.Log.Warn("node allocatable enforcement", "err", err)
		m.event(v1.EventTypeWarning, EventFailed, "Failed to update Node Allocatable Limits: "+err.Error())
		select {
		case <-ctx.Done():
			return
		case <-time.After(m.deps.RetryPeriod):
		}
	}
}

func (m *Manager) event(typ, reason, msg string) {
	if m.deps.Recorder != nil && m.deps.Node != nil {
		m.deps.Recorder.Eventf(m.deps.Node, typ, reason, "%s", msg)
	}
}
