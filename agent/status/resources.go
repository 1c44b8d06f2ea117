package status

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// The smallest cpu figures a cgroup expresses (2 shares, a 10m quota): below them the runtime's
// figure says nothing, and the allocated one is reported instead.
const (
	minMilliCPURequest = 2
	minMilliCPULimit   = 10
)

// statusResources are a container's status.resources as the kubelet reports them: the allocated
// resources (spec is the container as allocated), with, for a running container, the cpu request,
// cpu limit and memory limit the runtime reports (else those the previous status of the same
// container reported) and the memory request last actuated. A container not running reports its
// allocation: it gets exactly that when it starts.
func statusResources(spec *v1.Container, cur *kubecontainer.Status, id string, old *v1.ContainerStatus,
	actuated func(string) (v1.ResourceRequirements, bool)) *v1.ResourceRequirements {
	out := spec.Resources.DeepCopy()
	if cur.State != kubecontainer.StateRunning {
		return out
	}
	rt := cur.Resources
	if rt == nil {
		rt = &kubecontainer.ContainerResources{}
	}
	// keepOld copies a figure from the previous status while it describes this same running container.
	keepOld := func(name v1.ResourceName, from func(*v1.ResourceRequirements) v1.ResourceList, to v1.ResourceList) {
		if old == nil || old.State.Running == nil || old.ContainerID != id || old.Resources == nil {
			return
		}
		if q, ok := from(old.Resources)[name]; ok {
			to[name] = q.DeepCopy()
		}
	}
	limits := func(r *v1.ResourceRequirements) v1.ResourceList { return r.Limits }
	requests := func(r *v1.ResourceRequirements) v1.ResourceList { return r.Requests }
	if out.Limits != nil {
		switch {
		case rt.CPULimit != nil:
			if rt.CPULimit.MilliValue() > minMilliCPULimit || out.Limits.Cpu().MilliValue() > minMilliCPULimit {
				out.Limits[v1.ResourceCPU] = rt.CPULimit.DeepCopy()
			}
		default:
			keepOld(v1.ResourceCPU, limits, out.Limits)
		}
		if rt.MemoryLimit != nil {
			out.Limits[v1.ResourceMemory] = rt.MemoryLimit.DeepCopy()
		} else {
			keepOld(v1.ResourceMemory, limits, out.Limits)
		}
	}
	if out.Requests != nil {
		switch {
		case rt.CPURequest != nil:
			if rt.CPURequest.MilliValue() > minMilliCPURequest || out.Requests.Cpu().MilliValue() > minMilliCPURequest {
				out.Requests[v1.ResourceCPU] = rt.CPURequest.DeepCopy()
			}
		default:
			keepOld(v1.ResourceCPU, requests, out.Requests)
		}
		// No cgroup figure holds a memory request: it is what was last actuated.
		if _, ok := out.Requests[v1.ResourceMemory]; ok && actuated != nil {
			if a, found := actuated(spec.Name); found {
				out.Requests[v1.ResourceMemory] = a.Requests.Memory().DeepCopy()
			}
		}
	}
	return out
}
