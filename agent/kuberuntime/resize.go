package kuberuntime

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/cm"
	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/podmanager"
)

// Allocation is what the runtime manager records and reads of the resources pods hold
// (*allocation.Manager). The pods SyncPod gets are already as allocated.
type Allocation interface {
	// SetActuatedResources records what the runtime was given for c (at creation or by a resize).
	SetActuatedResources(pod *v1.Pod, c *v1.Container) error
	// ActuatedResources are what the runtime was last given for a container.
	ActuatedResources(uid types.UID, container string) (v1.ResourceRequirements, bool)
	// ActuatedPod is the pod with its containers' actuated resources: what its cgroup holds.
	ActuatedPod(pod *v1.Pod) *v1.Pod
	// ResizeFailed reports a resize the runtime or the pod cgroup refused (PodResizeInProgress, reason Error).
	ResizeFailed(pod *v1.Pod, message string)
}

// PodCgroups are the pod cgroups a resize changes (*qos.Manager).
type PodCgroups interface {
	// PodLimits are the limits the pod's cgroup gets for the pod's (container) resources.
	PodLimits(pod *v1.Pod) cm.Limits
	// SetPodLimits writes the set fields of l on the pod's cgroup.
	SetPodLimits(pod *v1.Pod, l cm.Limits) error
	// PodMemoryUsage is the pod cgroup's memory usage in bytes.
	PodMemoryUsage(pod *v1.Pod) (int64, error)
}

// actuatedFunc looks up what a container of the pod was last given; nil resizes nothing in place.
type actuatedFunc func(container string) (v1.ResourceRequirements, bool)

// actuatedFor is the plan's view of the pod's actuated resources. Static pods are never resized
// in place (their spec cannot change without a new UID).
func (m *Manager) actuatedFor(pod *v1.Pod) actuatedFunc {
	if m.Allocation == nil || podmanager.IsStaticPod(pod) {
		return nil
	}
	return func(name string) (v1.ResourceRequirements, bool) {
		return m.Allocation.ActuatedResources(pod.UID, name)
	}
}

// containerResources are the resizable figures of a container: millicores and bytes.
type containerResources struct {
	memoryLimit, memoryRequest, cpuLimit, cpuRequest int64
}

func resourcesFrom(r v1.ResourceRequirements) containerResources {
	return containerResources{
		memoryLimit:   r.Limits.Memory().Value(),
		memoryRequest: r.Requests.Memory().Value(),
		cpuLimit:      r.Limits.Cpu().MilliValue(),
		cpuRequest:    r.Requests.Cpu().MilliValue(),
	}
}

// containerToUpdate is a running container whose cpu or memory changes in place.
type containerToUpdate struct {
	ID      string
	Spec    *v1.Container // as allocated
	desired containerResources
	current containerResources
}

// resizePolicyRestarts: the container's resizePolicy for the resource says RestartContainer (the
// default is NotRequired).
func resizePolicyRestarts(c *v1.Container, name v1.ResourceName) bool {
	for _, p := range c.ResizePolicy {
		if p.ResourceName == name {
			return p.RestartPolicy == v1.RestartContainer
		}
	}
	return false
}

// computePodResizeAction plans the resize of one running container: in place
// (UpdateContainerResources, decreases ordered before increases) or, where the resizePolicy of a
// changed resource says RestartContainer, a kill and a start. It reports whether the container is
// kept; a restarted one has been put in the plan's kills, and the caller schedules its start.
func computePodResizeAction(c *v1.Container, cs *kubecontainer.Status, actuated actuatedFunc, changes *podActions) bool {
	if actuated == nil || cs.State != kubecontainer.StateRunning {
		return true
	}
	// A container with no record (admission records running containers, so only a lost record)
	// counts as given nothing, as with the kubelet: an in-place update repeats what it has.
	act, _ := actuated(c.Name)
	desired, current := resourcesFrom(c.Resources), resourcesFrom(act)
	if desired == current {
		return true
	}
	memChanged := desired.memoryLimit != current.memoryLimit || desired.memoryRequest != current.memoryRequest
	cpuChanged := desired.cpuLimit != current.cpuLimit || desired.cpuRequest != current.cpuRequest
	if (memChanged && resizePolicyRestarts(c, v1.ResourceMemory)) || (cpuChanged && resizePolicyRestarts(c, v1.ResourceCPU)) {
		changes.ContainersToKill[cs.ID] = containerToKill{Name: c.Name, Spec: c,
			Message: fmt.Sprintf("Container %s resize requires restart", c.Name), ForResize: true}
		changes.UpdatePodResources = true
		return false
	}
	if changes.ContainersToUpdate == nil {
		changes.ContainersToUpdate = map[v1.ResourceName][]containerToUpdate{}
	}
	u := containerToUpdate{ID: cs.ID, Spec: c, desired: desired, current: current}
	mark := func(name v1.ResourceName, want, have int64) {
		list := changes.ContainersToUpdate[name]
		if want < have {
			list = append([]containerToUpdate{u}, list...)
		} else {
			list = append(list, u)
		}
		changes.ContainersToUpdate[name] = list
	}
	switch {
	case desired.memoryLimit != current.memoryLimit:
		mark(v1.ResourceMemory, desired.memoryLimit, current.memoryLimit)
	case desired.memoryRequest != current.memoryRequest:
		mark(v1.ResourceMemory, desired.memoryRequest, current.memoryRequest)
	}
	switch {
	case desired.cpuLimit != current.cpuLimit:
		mark(v1.ResourceCPU, desired.cpuLimit, current.cpuLimit)
	case desired.cpuRequest != current.cpuRequest:
		mark(v1.ResourceCPU, desired.cpuRequest, current.cpuRequest)
	}
	return true
}

// withResource returns r with the cpu or memory figures (name) taken from from: an update of one
// resource changes only that one.
func withResource(r, from v1.ResourceRequirements, name v1.ResourceName) v1.ResourceRequirements {
	out := *r.DeepCopy()
	set := func(dst *v1.ResourceList, src v1.ResourceList) {
		q, ok := src[name]
		switch {
		case ok:
			if *dst == nil {
				*dst = v1.ResourceList{}
			}
			(*dst)[name] = q.DeepCopy()
		case *dst != nil:
			delete(*dst, name)
		}
	}
	set(&out.Requests, from.Requests)
	set(&out.Limits, from.Limits)
	return out
}

// doPodResizeAction carries out the plan's resize, one resource at a time (memory, then cpu), as
// the kubelet does: the pod cgroup's limit is raised before the containers' and lowered after
// them, so a container never holds more than its pod; each container's update is recorded as
// actuated once the runtime accepted it. A memory limit below what the pod or container uses now
// is refused before anything changes (the kernel would have to reclaim or kill). The first failure
// stops the resize: the next sync takes it up again from what was actuated.
func (m *Manager) doPodResizeAction(ctx context.Context, pod *v1.Pod, plan podActions) error {
	if m.Allocation == nil {
		return nil
	}
	var cur, want cm.Limits
	if m.PodCgroups != nil {
		cur, want = m.PodCgroups.PodLimits(m.Allocation.ActuatedPod(pod)), m.PodCgroups.PodLimits(pod)
	}
	doMemory := len(plan.ContainersToUpdate[v1.ResourceMemory]) > 0 || plan.UpdatePodResources
	doCPU := len(plan.ContainersToUpdate[v1.ResourceCPU]) > 0 || plan.UpdatePodResources
	if doMemory {
		if err := m.checkMemoryDecrease(ctx, pod, cur, want, plan.ContainersToUpdate[v1.ResourceMemory]); err != nil {
			return err
		}
	}
	// setPod writes l on the pod cgroup when do says so, and tells the runtime what the pod cgroup
	// holds now.
	setPod := func(do bool, what string, l cm.Limits) error {
		if !do || m.PodCgroups == nil {
			return nil
		}
		if err := m.PodCgroups.SetPodLimits(pod, l); err != nil {
			return fmt.Errorf("pod cgroup %s: %w", what, err)
		}
		cur = mergeLimits(cur, l)
		m.sandboxResized(ctx, pod, plan.SandboxID, cur)
		return nil
	}
	if doMemory {
		raise, lower := limitSteps(cur.Memory, want.Memory)
		mem := cm.Limits{Memory: want.Memory}
		if err := setPod(raise, "memory", mem); err != nil {
			return err
		}
		if err := m.updateContainers(ctx, pod, v1.ResourceMemory, plan.ContainersToUpdate[v1.ResourceMemory]); err != nil {
			return err
		}
		if err := setPod(lower, "memory", mem); err != nil {
			return err
		}
	}
	if doCPU {
		raiseQuota, lowerQuota := limitSteps(cur.CPUQuota, want.CPUQuota)
		raiseShares, lowerShares := sharesSteps(cur.CPUShares, want.CPUShares)
		quota := cm.Limits{CPUQuota: want.CPUQuota, CPUPeriod: want.CPUPeriod}
		shares := cm.Limits{CPUShares: want.CPUShares}
		// Limits grow before requests and requests shrink before limits, so requests stay within
		// limits all along.
		if err := setPod(raiseQuota, "cpu quota", quota); err != nil {
			return err
		}
		if err := setPod(raiseShares, "cpu shares", shares); err != nil {
			return err
		}
		if err := m.updateContainers(ctx, pod, v1.ResourceCPU, plan.ContainersToUpdate[v1.ResourceCPU]); err != nil {
			return err
		}
		if err := setPod(lowerShares, "cpu shares", shares); err != nil {
			return err
		}
		if err := setPod(lowerQuota, "cpu quota", quota); err != nil {
			return err
		}
	}
	return nil
}

// limitSteps says whether a pod cgroup limit is raised (before the containers) or lowered (after).
// No limit, or a negative one, is unbounded; a wanted limit of none is left as it is (limits are
// not removed by a resize).
func limitSteps(cur, want *int64) (raise, lower bool) {
	if want == nil || *want < 0 {
		return false, false
	}
	switch {
	case cur == nil || *cur < 0:
		return false, true
	case *want > *cur:
		return true, false
	case *want < *cur:
		return false, true
	}
	return false, false
}

func sharesSteps(cur, want *uint64) (raise, lower bool) {
	if want == nil {
		return false, false
	}
	switch {
	case cur == nil || *want > *cur:
		return true, false
	case *want < *cur:
		return false, true
	}
	return false, false
}

// updateContainers gives each container its new figures of one resource through
// UpdateContainerResources, in the plan's order, and records each as actuated.
func (m *Manager) updateContainers(ctx context.Context, pod *v1.Pod, name v1.ResourceName, list []containerToUpdate) error {
	for _, u := range list {
		// Read afresh: the memory step of this same resize may have just changed the record.
		act, _ := m.Allocation.ActuatedResources(pod.UID, u.Spec.Name)
		c := u.Spec.DeepCopy()
		c.Resources = withResource(act, u.Spec.Resources, name)
		req := &runtimeapi.UpdateContainerResourcesRequest{ContainerId: u.ID, Linux: m.containerLinuxResources(pod, c)}
		if _, err := m.Runtime.UpdateContainerResources(ctx, req); err != nil {
			return fmt.Errorf("update resources of container %s: %w", c.Name, err)
		}
		if err := m.Allocation.SetActuatedResources(pod, c); err != nil {
			return fmt.Errorf("record resources of container %s: %w", c.Name, err)
		}
	}
	return nil
}

// containerLinuxResources are the cgroup figures a container of the pod gets, as at its creation
// (an update carries them all, so a runtime that replaces rather than merges keeps the rest).
func (m *Manager) containerLinuxResources(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerResources {
	r := m.containerResources(pod, c)
	if m.CPUs != nil {
		r.CpusetCpus = m.CPUs.CPUSet(pod, c.Name)
	}
	return r
}

// checkMemoryDecrease refuses a resize that would set a pod's or a container's memory limit at or
// below what it uses now, as the kubelet does.
func (m *Manager) checkMemoryDecrease(ctx context.Context, pod *v1.Pod, cur, want cm.Limits, list []containerToUpdate) error {
	var problems []string
	if want.Memory != nil && (cur.Memory == nil || *cur.Memory < 0 || *want.Memory < *cur.Memory) && m.PodCgroups != nil {
		used, err := m.PodCgroups.PodMemoryUsage(pod)
		switch {
		case err != nil:
			problems = append(problems, "missing pod memory usage")
		case used >= *want.Memory:
			problems = append(problems, fmt.Sprintf("attempting to set pod memory limit (%d) below current usage (%d)", *want.Memory, used))
		}
	}
	for _, u := range list {
		if u.desired.memoryLimit == 0 || (u.current.memoryLimit != 0 && u.desired.memoryLimit >= u.current.memoryLimit) {
			continue
		}
		st, err := m.Runtime.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: u.ID})
		used := st.GetStats().GetMemory().GetUsageBytes()
		switch {
		case err != nil || used == nil:
			problems = append(problems, fmt.Sprintf("missing container %q memory usage", u.Spec.Name))
		case int64(used.Value) >= u.desired.memoryLimit:
			problems = append(problems, fmt.Sprintf("attempting to set container %q memory limit (%d) below current usage (%d)",
				u.Spec.Name, u.desired.memoryLimit, used.Value))
		}
	}
	switch len(problems) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("cannot decrease memory limits: %s", problems[0])
	}
	return fmt.Errorf("cannot decrease memory limits: [%s]", strings.Join(problems, ", "))
}

// mergeLimits is cur with the fields l sets replaced.
func mergeLimits(cur, l cm.Limits) cm.Limits {
	if l.CPUShares != nil {
		cur.CPUShares = l.CPUShares
	}
	if l.CPUQuota != nil {
		cur.CPUQuota = l.CPUQuota
	}
	if l.CPUPeriod != nil {
		cur.CPUPeriod = l.CPUPeriod
	}
	if l.Memory != nil {
		cur.Memory = l.Memory
	}
	return cur
}

// sandboxResized tells the runtime what the pod cgroup holds after a step of a resize, the
// RuntimeClass overhead apart, as the kubelet does after each pod cgroup write: a runtime that sized
// something for the whole pod (a VM) can follow. Best effort, as in the kubelet: a runtime without the
// call, or refusing it, does not stop the resize, whose containers are updated one by one anyway.
func (m *Manager) sandboxResized(ctx context.Context, pod *v1.Pod, sandboxID string, l cm.Limits) {
	_, overhead := sandboxResources(pod)
	res := &runtimeapi.LinuxContainerResources{}
	if l.CPUPeriod != nil && l.CPUQuota != nil {
		res.CpuPeriod = int64(*l.CPUPeriod)
		res.CpuQuota = *l.CPUQuota
		if q := pod.Spec.Overhead.Cpu().MilliValue(); q > 0 {
			res.CpuQuota -= cm.MilliCPUToQuota(q, *l.CPUPeriod)
		}
	}
	if l.CPUShares != nil {
		res.CpuShares = int64(*l.CPUShares)
		if q := pod.Spec.Overhead.Cpu().MilliValue(); q > 0 {
			res.CpuShares = int64(cm.MilliCPUToShares(sharesToMilliCPU(res.CpuShares) - q))
		}
	}
	if l.Memory != nil {
		res.MemoryLimitInBytes = *l.Memory - pod.Spec.Overhead.Memory().Value()
	}
	_, err := m.Runtime.UpdatePodSandboxResources(ctx, &runtimeapi.UpdatePodSandboxResourcesRequest{
		PodSandboxId: sandboxID, Resources: res, Overhead: overhead})
	if err != nil && status.Code(err) != codes.Unimplemented {
		m.Log.Warn("UpdatePodSandboxResources failed; the resize goes on", "pod", kubecontainer.FormatPod(pod), "err", err)
	}
}
