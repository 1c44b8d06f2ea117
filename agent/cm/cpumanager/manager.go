// Package cpumanager is the kubelet's CPU manager: with the static policy, the containers of
// Guaranteed pods that ask for whole CPUs get CPUs of their own, and every other container runs
// on the shared pool, which shrinks and grows as exclusive CPUs are taken and given back. The
// assignments are checkpointed in the kubelet's cpu_manager_state format, so a restarted agent
// keeps its running containers where they are.
//
// It speaks to containers only through CRI (the cpuset at CreateContainer and
// UpdateContainerResources), so it works over any runtime.
package cpumanager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/cpuset"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/metrics"
)

// The policies, as the kubelet spells them.
const (
	PolicyNone   = "none"
	PolicyStatic = "static"
)

// OptionFullPCPUsOnly is the one policy option honoured: exclusive CPUs come as whole physical
// cores, and a request that is not a multiple of the threads per core is refused.
const OptionFullPCPUsOnly = "full-pcpus-only"

// ReasonSMTAlignment is the admission failure reason of full-pcpus-only, as the kubelet's.
const ReasonSMTAlignment = "SMTAlignmentError"

// Config is the kubelet configuration's cpuManager* and reservation fields.
type Config struct {
	Policy  string
	Options map[string]string
	// ReconcilePeriod is how often every running container's cpuset is checked (10s default).
	ReconcilePeriod time.Duration
	// ReservedSystemCPUs (reservedSystemCPUs) are kept out of exclusive assignment; empty
	// reserves ceil(ReservedCPU) CPUs chosen by topology instead.
	ReservedSystemCPUs cpuset.CPUSet
	// ReservedCPU is systemReserved.cpu + kubeReserved.cpu.
	ReservedCPU resource.Quantity
	// StateDir holds the checkpoint (the root dir).
	StateDir string
}

// Runtime is the part of CRI the manager needs.
type Runtime interface {
	ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error)
	UpdateContainerResources(ctx context.Context, in *runtimeapi.UpdateContainerResourcesRequest, opts ...grpc.CallOption) (*runtimeapi.UpdateContainerResourcesResponse, error)
}

// Deps are what the manager reads and calls.
type Deps struct {
	Topology *Topology
	Runtime  Runtime
	// Holds reports whether a pod still holds its CPUs: a pod source lists it (already when it
	// is being admitted) and it has not finished, or its containers may still run.
	Holds func(podUID string) bool
	// SourcesReady reports whether every pod source has spoken since the start; until then no
	// assignment is given back, since a pod not yet heard of may be running on it. Nil: ready.
	SourcesReady func() bool
	Log          *slog.Logger
}

// AdmitError is an admission refusal with the kubelet's reason.
type AdmitError struct{ Reason, Message string }

func (e *AdmitError) Error() string { return e.Message }

// Manager is the CPU manager.
type Manager struct {
	cfg      Config
	deps     Deps
	path     string
	reserved cpuset.CPUSet
	fullCore bool
	wake     chan struct{}

	mu sync.Mutex
	st *state
	// applied is the cpuset last written to each running container, by container ID.
	applied map[string]string
}

// New checks the configuration against the machine and restores the checkpoint; a checkpoint of
// another policy, or whose CPUs no longer add up to the machine's, is refused (the kubelet's
// rule: drain the node and delete the file to change either).
func New(cfg Config, d Deps) (*Manager, error) {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if cfg.ReconcilePeriod <= 0 {
		cfg.ReconcilePeriod = 10 * time.Second
	}
	m := &Manager{cfg: cfg, deps: d, path: filepath.Join(cfg.StateDir, StateFile), applied: map[string]string{},
		wake: make(chan struct{}, 1), reserved: cpuset.New()}
	switch cfg.Policy {
	case PolicyNone:
		if len(cfg.Options) > 0 {
			return nil, errors.New("cpuManagerPolicyOptions: only for the static policy")
		}
	case PolicyStatic:
		if err := m.setUpStatic(); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("cpuManagerPolicy %q: not supported (none or static)", cfg.Policy)
	}
	st, err := readState(m.path, cfg.Policy)
	switch {
	case errors.Is(err, errNoState):
		st = newState(cfg.Policy)
		if cfg.Policy == PolicyStatic {
			st.defaultSet = d.Topology.All()
		}
	case err != nil:
		return nil, err
	}
	if cfg.Policy == PolicyStatic {
		if err := m.validate(st); err != nil {
			return nil, restoreError(m.path, err)
		}
	}
	m.st = st
	if err := os.MkdirAll(cfg.StateDir, 0o750); err != nil {
		return nil, fmt.Errorf("CPU manager checkpoint: %w", err)
	}
	if err := st.write(m.path); err != nil {
		return nil, fmt.Errorf("CPU manager checkpoint: %w", err)
	}
	return m, nil
}

func (m *Manager) setUpStatic() error {
	t := m.deps.Topology
	for k, v := range m.cfg.Options {
		if k != OptionFullPCPUsOnly {
			return fmt.Errorf("cpuManagerPolicyOptions: %q: not supported (only %s)", k, OptionFullPCPUsOnly)
		}
		switch v {
		case "true":
			m.fullCore = true
		case "false":
		default:
			return fmt.Errorf("cpuManagerPolicyOptions: %s: %q is not true or false", k, v)
		}
	}
	all := t.All()
	if m.cfg.ReservedSystemCPUs.Size() > 0 {
		if !m.cfg.ReservedSystemCPUs.IsSubsetOf(all) {
			return fmt.Errorf("reservedSystemCPUs %q: not all of them are online CPUs (%q)", m.cfg.ReservedSystemCPUs, all)
		}
		m.reserved = m.cfg.ReservedSystemCPUs
		return nil
	}
	n := int(math.Ceil(float64(m.cfg.ReservedCPU.MilliValue()) / 1000))
	if n == 0 {
		// Without a reserved CPU, the shared pool could be emptied by exclusive assignments,
		// leaving the agent, the runtime and every Burstable pod without a CPU to run on.
		return errors.New("the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero")
	}
	var err error
	if m.reserved, err = t.take(all, n); err != nil {
		return fmt.Errorf("reserving %d CPUs: %w", n, err)
	}
	return nil
}

// validate checks a restored static state: the reserved CPUs are shared, no CPU is both shared
// and exclusive, and together they are exactly the online CPUs.
func (m *Manager) validate(st *state) error {
	all := m.deps.Topology.All()
	if st.defaultSet.IsEmpty() && len(st.assignments) == 0 {
		st.defaultSet = all
	}
	if !m.reserved.IsSubsetOf(st.defaultSet) {
		return fmt.Errorf("not all reserved cpus: %q are present in defaultCpuSet: %q", m.reserved, st.defaultSet)
	}
	for pod, containers := range st.assignments {
		for name, set := range containers {
			if !set.Intersection(st.defaultSet).IsEmpty() {
				return fmt.Errorf("pod: %s, container: %s cpuset: %q overlaps with default cpuset %q", pod, name, set, st.defaultSet)
			}
		}
	}
	if got := st.defaultSet.Union(st.exclusive()); !got.Equals(all) {
		return fmt.Errorf("current set of available CPUs %q doesn't match with CPUs in state %q", all, got)
	}
	return nil
}

// Policy is the configured policy.
func (m *Manager) Policy() string { return m.cfg.Policy }

// GuaranteedCPUs is how many exclusive CPUs the container gets: its cpu request when the pod is
// Guaranteed and the request is whole CPUs, else 0 (it runs on the shared pool).
func GuaranteedCPUs(pod *v1.Pod, c *v1.Container) int {
	if kubecontainer.PodQOSClass(pod) != v1.PodQOSGuaranteed {
		return 0
	}
	q, ok := c.Resources.Requests[v1.ResourceCPU]
	if !ok {
		// A request left out is the limit (the API's defaulting; a manifest may not have had it).
		q = c.Resources.Limits[v1.ResourceCPU]
	}
	if q.MilliValue()%1000 != 0 {
		return 0
	}
	return int(q.MilliValue() / 1000)
}

// Admit gives the pod's containers their exclusive CPUs, or refuses the pod with the kubelet's
// reason when they are not free. Init containers run before the app containers, so the CPUs of
// the ones that end (not sidecars) are given again to the app containers after them.
func (m *Manager) Admit(pod *v1.Pod) error {
	if m.cfg.Policy != PolicyStatic {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	uid := string(pod.UID)
	m.removeStale()
	reusable := cpuset.New()
	took := false
	// A pod is admitted whole or not at all: a refusal puts back what its first containers took.
	shared, had := m.st.defaultSet, maps.Clone(m.st.assignments[uid])
	undo := func() {
		m.st.defaultSet = shared
		if had == nil {
			delete(m.st.assignments, uid)
		} else {
			m.st.assignments[uid] = had
		}
	}
	allocate := func(c *v1.Container, endsBeforeApps bool) error {
		n := GuaranteedCPUs(pod, c)
		if n == 0 {
			return nil
		}
		if set, ok := m.st.assigned(uid, c.Name); ok {
			// Admitted before (the agent restarted): keep what the container runs on.
			if endsBeforeApps {
				reusable = reusable.Union(set)
			} else {
				reusable = reusable.Difference(set)
			}
			return nil
		}
		free := m.st.defaultSet.Union(reusable).Difference(m.reserved)
		if m.fullCore {
			if per := m.deps.Topology.CPUsPerCore(); n%per != 0 {
				metrics.CPUPinning(true)
				return &AdmitError{Reason: ReasonSMTAlignment,
					Message: fmt.Sprintf("SMT Alignment Error: requested %d cpus not multiple cpus per core = %d", n, per)}
			}
			// Reserved CPUs may not be whole cores; their siblings are not whole cores either.
			whole := m.deps.Topology.freeCores(free.Union(m.reserved)).Difference(m.reserved)
			whole = m.deps.Topology.freeCores(whole)
			if n > whole.Size() {
				metrics.CPUPinning(true)
				return &AdmitError{Reason: ReasonSMTAlignment, Message: fmt.Sprintf(
					"SMT Alignment Error: not enough free physical CPUs: available physical CPUs = %d, requested CPUs = %d, CPUs per core = %d",
					whole.Size(), n, m.deps.Topology.CPUsPerCore())}
			}
			free = whole
		}
		set, err := m.deps.Topology.take(free, n)
		metrics.CPUPinning(err != nil)
		if err != nil {
			return &AdmitError{Reason: "UnexpectedAdmissionError", Message: fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)}
		}
		m.st.assign(uid, c.Name, set)
		m.st.defaultSet = m.st.defaultSet.Difference(set)
		took = true
		if endsBeforeApps {
			reusable = reusable.Union(set)
		} else {
			reusable = reusable.Difference(set)
		}
		return nil
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
		if err := allocate(c, !sidecar); err != nil {
			undo()
			return err
		}
	}
	for i := range pod.Spec.Containers {
		if err := allocate(&pod.Spec.Containers[i], false); err != nil {
			undo()
			return err
		}
	}
	if !took {
		return nil
	}
	if err := m.st.write(m.path); err != nil {
		undo()
		return &AdmitError{Reason: "UnexpectedAdmissionError", Message: fmt.Sprintf("Allocate failed due to %v, which is unexpected", err)}
	}
	m.publish()
	m.deps.Log.Info("exclusive CPUs assigned", "pod", pod.Namespace+"/"+pod.Name, "shared", m.st.defaultSet.String())
	m.kick()
	return nil
}

// CPUSet is the cpuset a container is created with: its exclusive CPUs, else the shared pool;
// "" under the none policy (the runtime's default, every CPU).
func (m *Manager) CPUSet(pod *v1.Pod, container string) string {
	if m.cfg.Policy != PolicyStatic {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cpuSet(string(pod.UID), container)
}

func (m *Manager) cpuSet(uid, container string) string {
	if set, ok := m.st.assigned(uid, container); ok {
		return set.String()
	}
	return m.st.defaultSet.String()
}

// SharedPool is the CPUs of containers without exclusive ones.
func (m *Manager) SharedPool() cpuset.CPUSet {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st.defaultSet
}

// Reserved is the CPUs never given exclusively.
func (m *Manager) Reserved() cpuset.CPUSet { return m.reserved }

// removeStale gives back the CPUs of pods that no longer hold them. Called with mu held.
func (m *Manager) removeStale() {
	if len(m.st.assignments) == 0 || (m.deps.SourcesReady != nil && !m.deps.SourcesReady()) {
		return
	}
	changed := false
	for uid, containers := range m.st.assignments {
		if m.deps.Holds(uid) {
			continue
		}
		for _, set := range containers {
			m.st.defaultSet = m.st.defaultSet.Union(set)
		}
		delete(m.st.assignments, uid)
		changed = true
	}
	if !changed {
		return
	}
	// Exclusive sets of one pod may overlap (init containers' CPUs are reused); what is still
	// held by another pod never came back, by construction.
	m.st.defaultSet = m.st.defaultSet.Difference(m.st.exclusive())
	if err := m.st.write(m.path); err != nil {
		m.deps.Log.Error("CPU manager checkpoint", "err", err)
	}
	m.publish()
	m.deps.Log.Info("exclusive CPUs returned", "shared", m.st.defaultSet.String())
}

// publish sets the pools' metrics. Called with mu held.
func (m *Manager) publish() {
	metrics.SetCPUPools(m.st.defaultSet.Size(), m.st.exclusive().Size())
}

// kick asks the reconcile loop to run now: the shared pool changed.
func (m *Manager) kick() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Run reconciles every ReconcilePeriod and whenever the shared pool changes, until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	if m.cfg.Policy != PolicyStatic {
		return
	}
	m.mu.Lock()
	m.publish()
	m.mu.Unlock()
	t := time.NewTicker(m.cfg.ReconcilePeriod)
	defer t.Stop()
	for {
		m.Reconcile(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-m.wake:
		}
	}
}

// Reconcile returns the CPUs of pods that are gone and writes its cpuset on every running
// container of a pod holding CPUs whose cpuset is not known to be right: the shared pool's
// containers follow the pool as it changes, and after a restart every container is written once.
func (m *Manager) Reconcile(ctx context.Context) {
	m.mu.Lock()
	m.removeStale()
	m.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, m.cfg.ReconcilePeriod)
	defer cancel()
	resp, err := m.deps.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil {
		m.deps.Log.Warn("CPU manager reconcile: listing containers", "err", err)
		return
	}
	seen := map[string]bool{}
	for _, c := range resp.GetContainers() {
		uid := c.GetLabels()[kubecontainer.LabelPodUID]
		if uid == "" || !m.deps.Holds(uid) {
			continue
		}
		seen[c.GetId()] = true
		m.mu.Lock()
		want := m.cpuSet(uid, c.GetLabels()[kubecontainer.LabelContainerName])
		done := m.applied[c.GetId()] == want
		m.mu.Unlock()
		if done {
			continue
		}
		if _, err := m.deps.Runtime.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{
			ContainerId: c.GetId(), Linux: &runtimeapi.LinuxContainerResources{CpusetCpus: want}}); err != nil {
			// It may have just exited; the next pass tries again if not.
			m.deps.Log.Warn("CPU manager reconcile: updating cpuset", "container", c.GetId(), "cpuset", want, "err", err)
			continue
		}
		m.mu.Lock()
		m.applied[c.GetId()] = want
		m.mu.Unlock()
	}
	m.mu.Lock()
	for id := range m.applied {
		if !seen[id] {
			delete(m.applied, id)
		}
	}
	m.mu.Unlock()
}

// Created records the cpuset a container was created with, so the next reconcile writes it
// only if the pool has changed since.
func (m *Manager) Created(containerID, cpus string) {
	if m.cfg.Policy != PolicyStatic || cpus == "" {
		return
	}
	m.mu.Lock()
	m.applied[containerID] = cpus
	m.mu.Unlock()
}
