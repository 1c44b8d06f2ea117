// Package allocation keeps the resources the agent gave each pod, as the kubelet's allocation
// manager does for in-place pod resize (InPlacePodVerticalScaling).
//
// A pod's containers have three sets of resources:
//
//   - desired: the spec, which the apiserver's `resize` subresource changes;
//   - allocated: what admission (or an accepted resize) granted; the pod worker syncs the pod as
//     allocated, and admission counts every running pod by it;
//   - actuated: what was last handed to the runtime for each container (at creation, or by
//     UpdateContainerResources).
//
// When desired differs from allocated, the resize is decided: it fits beside the other pods'
// allocations → allocated (PodResizeInProgress until every running container's actuated resources
// equal the allocation, then a ResizeCompleted event); it does not fit now → PodResizePending
// Deferred, retried when pods go away; it can never fit → PodResizePending Infeasible. Allocated
// and actuated resources are checkpointed under the root dir, so a restarted agent neither resizes
// again nor forgets a resize it accepted.
package allocation

import (
	"encoding/json"
	"log/slog"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/recorder"
)

// Deps are what the manager reads.
type Deps struct {
	// State is the allocations to decide on; nil opens them under RootDir.
	State *State
	// RootDir holds the checkpoints; empty keeps them in memory only.
	RootDir string
	// Admit is the agent's admission of pod beside others (both as allocated); an error refuses it,
	// and its text is the reason a resize is deferred. Nil admits everything.
	Admit func(pod *v1.Pod, others []*v1.Pod) error
	// ActivePods are the pods admitted and not finished (their specs as desired).
	ActivePods func() []*v1.Pod
	// Allocatable is the most the node's pods could hold (capacity less reservations, before the
	// hard eviction thresholds); a resize beyond it is infeasible. Nil never finds one too large.
	Allocatable func() v1.ResourceList
	// StaticCPUPolicy reports the CPU manager's static policy (exclusive cpus for Guaranteed pods),
	// with which the kubelet refuses to resize a Guaranteed pod's cpu. Nil: no static policy.
	StaticCPUPolicy func() bool
	// Recorder gets the ResizeCompleted events; nil records none.
	Recorder recorder.Interface
	Log      *slog.Logger
	Now      func() time.Time
}

// resizeConditions are a pod's PodResizePending and PodResizeInProgress conditions (nil: absent).
type resizeConditions struct {
	pending, inProgress *v1.PodCondition
}

// Manager keeps allocated and actuated resources and decides resizes.
type Manager struct {
	deps Deps
	// State is read by the parts the manager is handed to (pod workers, the runtime manager).
	*State

	// mu makes admission and resize decisions one at a time, so two never count the same room.
	mu sync.Mutex
	// pendingResizes are the pods whose resize is deferred, retried by RetryPendingResizes.
	pendingResizes map[types.UID]bool

	condMu     sync.Mutex
	conditions map[types.UID]resizeConditions
}

// New makes the manager over d.State, or over the checkpoints under d.RootDir.
func New(d Deps) (*Manager, error) {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Recorder == nil {
		d.Recorder = recorder.Discard{}
	}
	st := d.State
	if st == nil {
		var err error
		if st, err = OpenState(d.RootDir, d.Log); err != nil {
			return nil, err
		}
	}
	return &Manager{deps: d, State: st, pendingResizes: map[types.UID]bool{}, conditions: map[types.UID]resizeConditions{}}, nil
}

func isSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// allocationFromPod is what a pod's spec allocates: every app container's and sidecar's resources.
func allocationFromPod(pod *v1.Pod) podResources {
	out := podResources{}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		out[c.Name] = *c.Resources.DeepCopy()
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; isSidecar(c) {
			out[c.Name] = *c.Resources.DeepCopy()
		}
	}
	return out
}

// AddPod admits a new pod (Deps.Admit on the pod and the active pods, all as allocated) and
// records its allocation. A pod the agent admitted before a restart is admitted again with what it
// was allocated then, not with a resize it has not been granted yet.
func (m *Manager) AddPod(pod *v1.Pod, active []*v1.Pod) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	allocated, _ := m.UpdatePodFromAllocation(pod)
	if m.deps.Admit != nil {
		if err := m.deps.Admit(allocated, m.AllocatedPods(active)); err != nil {
			return err
		}
	}
	alloc := allocationFromPod(allocated)
	if err := m.allocated.setPod(pod.UID, alloc); err != nil {
		// Admission stands: the allocation is kept in memory and written again at the next change.
		m.deps.Log.Warn("checkpoint pod allocation", "pod", kubecontainer.FormatPod(pod), "err", err)
	}
	// Containers running with no record were made before the agent kept records (or its record
	// was lost): they hold what they were admitted with. New containers are recorded as made.
	if err := m.actuated.fillPod(pod.UID, alloc); err != nil {
		m.deps.Log.Warn("checkpoint actuated resources", "pod", kubecontainer.FormatPod(pod), "err", err)
	}
	return nil
}

// RemovePod forgets a pod that is gone; a deferred resize of another pod may fit now.
func (m *Manager) RemovePod(uid types.UID) {
	m.removeExcept(func(u types.UID) bool { return u != uid })
}

// RemoveOrphanedPods forgets every pod keep does not name.
func (m *Manager) RemoveOrphanedPods(keep map[types.UID]bool) {
	m.removeExcept(func(u types.UID) bool { return keep[u] })
}

func (m *Manager) removeExcept(keep func(types.UID) bool) {
	m.mu.Lock()
	for uid := range m.pendingResizes {
		if !keep(uid) {
			delete(m.pendingResizes, uid)
		}
	}
	m.mu.Unlock()
	for _, s := range []*store{m.allocated, m.actuated} {
		if err := s.removeExcept(keep); err != nil {
			m.deps.Log.Warn("checkpoint pod allocation", "err", err)
		}
	}
	m.condMu.Lock()
	for uid := range m.conditions {
		if !keep(uid) {
			delete(m.conditions, uid)
		}
	}
	m.condMu.Unlock()
}

// HandlePodResourcesResize decides the resize of a pod whose spec differs from its allocation and
// returns the pod as allocated: with the new resources when the resize was accepted, with the old
// ones while it is pending. A pod that was never allocated gets its spec as its allocation.
func (m *Manager) HandlePodResourcesResize(pod *v1.Pod) *v1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	allocated, _ := m.handleResizeLocked(pod)
	return allocated
}

// handleResizeLocked is HandlePodResourcesResize; accepted says a resize was allocated now.
func (m *Manager) handleResizeLocked(pod *v1.Pod) (allocated *v1.Pod, accepted bool) {
	if _, ok := m.allocated.pod(pod.UID); !ok {
		if err := m.allocated.setPod(pod.UID, allocationFromPod(pod)); err != nil {
			m.deps.Log.Warn("checkpoint pod allocation", "pod", kubecontainer.FormatPod(pod), "err", err)
		}
		return pod, false
	}
	allocated, differs := m.UpdatePodFromAllocation(pod)
	if !differs {
		// Nothing asked, or a pending resize was reverted.
		delete(m.pendingResizes, pod.UID)
		m.clearPending(pod.UID)
		return pod, false
	}
	var others []*v1.Pod
	if m.deps.ActivePods != nil {
		for _, p := range m.AllocatedPods(m.deps.ActivePods()) {
			if p.UID != pod.UID {
				others = append(others, p)
			}
		}
	}
	var allocatable v1.ResourceList
	if m.deps.Allocatable != nil {
		allocatable = m.deps.Allocatable()
	}
	static := m.deps.StaticCPUPolicy != nil && m.deps.StaticCPUPolicy()
	d := decideResize(pod, allocated, others, allocatable, static, m.deps.Admit)
	switch d.reason {
	case "":
		if err := m.allocated.setPod(pod.UID, allocationFromPod(pod)); err != nil {
			// Granted all the same: the store keeps it in memory and writes it at its next change.
			m.deps.Log.Warn("checkpoint pod allocation", "pod", kubecontainer.FormatPod(pod), "err", err)
		}
		delete(m.pendingResizes, pod.UID)
		m.clearPending(pod.UID)
		// A new resize starts: its condition carries this generation, with no error of an earlier one.
		m.clearInProgress(pod.UID)
		m.setInProgress(pod, "", "")
		m.deps.Log.Info("pod resize allocated", "pod", kubecontainer.FormatPod(pod))
		return pod, true
	case v1.PodReasonDeferred:
		m.pendingResizes[pod.UID] = true
	default:
		delete(m.pendingResizes, pod.UID)
	}
	m.setPending(pod, d.reason, d.message)
	return allocated, false
}

// RetryPendingResizes decides the deferred resizes again (after pods went away or shrank) and
// returns the pods whose resize is now allocated: their workers must sync them.
func (m *Manager) RetryPendingResizes() []*v1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.pendingResizes) == 0 || m.deps.ActivePods == nil {
		return nil
	}
	byUID := map[types.UID]*v1.Pod{}
	for _, p := range m.deps.ActivePods() {
		byUID[p.UID] = p
	}
	var pods []*v1.Pod
	for uid := range m.pendingResizes {
		p, ok := byUID[uid]
		if !ok {
			delete(m.pendingResizes, uid)
			continue
		}
		pods = append(pods, p)
	}
	m.sortPendingResizes(pods)
	var accepted []*v1.Pod
	for _, p := range pods {
		if _, ok := m.handleResizeLocked(p); ok {
			accepted = append(accepted, p)
		}
	}
	return accepted
}

// sortPendingResizes orders retries as the kubelet does: resizes that do not grow requests first,
// then by priority, Guaranteed before Burstable, then the longest deferred.
func (m *Manager) sortPendingResizes(pods []*v1.Pod) {
	growing := map[types.UID]bool{}
	since := map[types.UID]time.Time{}
	for _, p := range pods {
		a, _ := m.UpdatePodFromAllocation(p)
		growing[p.UID] = requestsGrow(a, p)
		if c := m.resizeConditions(p.UID).pending; c != nil {
			since[p.UID] = c.LastTransitionTime.Time
		}
	}
	prio := func(p *v1.Pod) int32 {
		if p.Spec.Priority != nil {
			return *p.Spec.Priority
		}
		return 0
	}
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if growing[a.UID] != growing[b.UID] {
			return !growing[a.UID]
		}
		if prio(a) != prio(b) {
			return prio(a) > prio(b)
		}
		ga, gb := kubecontainer.PodQOSClass(a) == v1.PodQOSGuaranteed, kubecontainer.PodQOSClass(b) == v1.PodQOSGuaranteed
		if ga != gb {
			return ga
		}
		return since[a.UID].Before(since[b.UID])
	})
}

// HasPendingResizes reports deferred resizes waiting for room.
func (m *Manager) HasPendingResizes() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pendingResizes) > 0
}

// CheckPodResizeInProgress sets PodResizeInProgress while a running resizable container's actuated
// cpu or memory differs from its allocation, and clears it (with a ResizeCompleted event) once
// none does. Containers not running are sized when they start.
func (m *Manager) CheckPodResizeInProgress(allocatedPod *v1.Pod, ps *kubecontainer.PodStatus) {
	if m.resizeInProgress(allocatedPod, ps) {
		m.setInProgress(allocatedPod, "", "")
		return
	}
	if m.clearInProgress(allocatedPod.UID) {
		m.deps.Recorder.Event(allocatedPod, v1.EventTypeNormal, "ResizeCompleted", resizeCompletedMessage(allocatedPod))
	}
}

func (m *Manager) resizeInProgress(pod *v1.Pod, ps *kubecontainer.PodStatus) bool {
	check := func(c *v1.Container) bool {
		cs := ps.FindContainerStatusByName(c.Name)
		if cs == nil || cs.State != kubecontainer.StateRunning {
			return false
		}
		act, _ := m.actuated.container(pod.UID, c.Name)
		return !SameCPUAndMemory(c.Resources, act)
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; isSidecar(c) && check(c) {
			return true
		}
	}
	for i := range pod.Spec.Containers {
		if check(&pod.Spec.Containers[i]) {
			return true
		}
	}
	return false
}

// SameCPUAndMemory compares the resizable resources: cpu and memory requests and limits.
func SameCPUAndMemory(a, b v1.ResourceRequirements) bool {
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		if !a.Requests[name].Equal(b.Requests[name]) || !a.Limits[name].Equal(b.Limits[name]) {
			return false
		}
	}
	return true
}

// ResizeFailed marks the resize in progress as failed (reason Error): the runtime or the
// pod's cgroup refused it. It is retried at the next sync.
func (m *Manager) ResizeFailed(pod *v1.Pod, message string) {
	m.setInProgress(pod, v1.PodReasonError, message)
}

// containerAllocation and resizeSummary shape the ResizeCompleted message as the kubelet's.
type containerAllocation struct {
	Name      string                  `json:"name"`
	Resources v1.ResourceRequirements `json:"resources,omitempty"`
}

type resizeSummary struct {
	InitContainers []containerAllocation `json:"initContainers,omitempty"`
	Containers     []containerAllocation `json:"containers,omitempty"`
}

func resizeCompletedMessage(pod *v1.Pod) string {
	var s resizeSummary
	for _, c := range pod.Spec.InitContainers {
		s.InitContainers = append(s.InitContainers, containerAllocation{Name: c.Name, Resources: c.Resources})
	}
	for _, c := range pod.Spec.Containers {
		s.Containers = append(s.Containers, containerAllocation{Name: c.Name, Resources: c.Resources})
	}
	b, err := json.Marshal(s)
	if err != nil {
		return "Pod resize completed"
	}
	return "Pod resize completed: " + string(b)
}

// requestsGrow says whether the desired pod asks more cpu or memory than the allocated one.
func requestsGrow(allocated, desired *v1.Pod) bool {
	a, d := podRequests(allocated), podRequests(desired)
	return d.Cpu().Cmp(*a.Cpu()) > 0 || d.Memory().Cmp(*a.Memory()) > 0
}

// newCondition makes a resize condition, keeping the transition time while the reason stays.
func newCondition(t v1.PodConditionType, old *v1.PodCondition, reason, message string, generation int64, now time.Time) *v1.PodCondition {
	c := &v1.PodCondition{Type: t, Status: v1.ConditionTrue, Reason: reason, Message: message,
		ObservedGeneration: generation, LastProbeTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)}
	if old != nil && old.Reason == reason {
		c.LastTransitionTime = old.LastTransitionTime
		if old.Message == message && old.ObservedGeneration == generation {
			// Unchanged: keep the probe time too, so the status does not change at every sync.
			c.LastProbeTime = old.LastProbeTime
		}
	}
	return c
}

func (m *Manager) resizeConditions(uid types.UID) resizeConditions {
	m.condMu.Lock()
	defer m.condMu.Unlock()
	return m.conditions[uid]
}

func (m *Manager) setPending(pod *v1.Pod, reason, message string) {
	m.condMu.Lock()
	defer m.condMu.Unlock()
	rc := m.conditions[pod.UID]
	rc.pending = newCondition(v1.PodResizePending, rc.pending, reason, message, pod.Generation, m.deps.Now())
	m.conditions[pod.UID] = rc
}

func (m *Manager) clearPending(uid types.UID) {
	m.condMu.Lock()
	defer m.condMu.Unlock()
	rc := m.conditions[uid]
	rc.pending = nil
	m.conditions[uid] = rc
}

// setInProgress sets PodResizeInProgress; an existing one keeps its generation (a new resize
// clears it first) and, when no reason is given, its reason and message.
func (m *Manager) setInProgress(pod *v1.Pod, reason, message string) {
	m.condMu.Lock()
	defer m.condMu.Unlock()
	rc := m.conditions[pod.UID]
	gen := pod.Generation
	if old := rc.inProgress; old != nil {
		if reason == "" && message == "" {
			reason, message = old.Reason, old.Message
		}
		gen = old.ObservedGeneration
	}
	rc.inProgress = newCondition(v1.PodResizeInProgress, rc.inProgress, reason, message, gen, m.deps.Now())
	m.conditions[pod.UID] = rc
}

// clearInProgress removes PodResizeInProgress and reports whether it was set.
func (m *Manager) clearInProgress(uid types.UID) bool {
	m.condMu.Lock()
	defer m.condMu.Unlock()
	rc := m.conditions[uid]
	was := rc.inProgress != nil
	rc.inProgress = nil
	m.conditions[uid] = rc
	return was
}

// PodResizeConditions are the pod's resize conditions for its status; a pod that finished has none.
func (m *Manager) PodResizeConditions(uid types.UID, terminal bool) []v1.PodCondition {
	m.condMu.Lock()
	defer m.condMu.Unlock()
	if terminal {
		delete(m.conditions, uid)
		return nil
	}
	rc := m.conditions[uid]
	var out []v1.PodCondition
	for _, c := range []*v1.PodCondition{rc.pending, rc.inProgress} {
		if c != nil {
			out = append(out, *c.DeepCopy())
		}
	}
	return out
}
