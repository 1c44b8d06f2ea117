package allocation

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/podmanager"
)

// decision is what becomes of a resize: no reason allocates it; PodReasonDeferred or
// PodReasonInfeasible leave it pending with the message.
type decision struct {
	reason, message string
}

// decideResize decides a resize as the kubelet does, in its order: what is never resized in place
// (static pods; a Guaranteed pod's cpu under the static CPU policy), what can never fit (more than
// the node's allocatable), then what does not fit now beside the other pods' allocations (admit
// refuses the desired pod among others), whose message is admission's. desired is the pod as its
// spec wants it, allocated as it holds now; others are the other active pods as allocated.
func decideResize(desired, allocated *v1.Pod, others []*v1.Pod, allocatable v1.ResourceList, staticCPU bool,
	admit func(pod *v1.Pod, others []*v1.Pod) error) decision {
	if podmanager.IsStaticPod(desired) {
		return decision{v1.PodReasonInfeasible, "In-place resize of static-pods is not supported"}
	}
	if staticCPU && kubecontainer.PodQOSClass(desired) == v1.PodQOSGuaranteed && cpuRequestsChange(desired, allocated) {
		return decision{v1.PodReasonInfeasible, `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"`}
	}
	if allocatable != nil {
		reqs := podRequests(desired)
		cpu, mem := reqs.Cpu().MilliValue(), reqs.Memory().Value()
		cpuCap, memCap := allocatable.Cpu().MilliValue(), allocatable.Memory().Value()
		switch {
		case mem > memCap:
			return decision{v1.PodReasonInfeasible, fmt.Sprintf("Node didn't have enough capacity: memory, requested: %d, capacity: %d", mem, memCap)}
		case cpu > cpuCap:
			return decision{v1.PodReasonInfeasible, fmt.Sprintf("Node didn't have enough capacity: cpu, requested: %d, capacity: %d", cpu, cpuCap)}
		}
	}
	if admit != nil {
		if err := admit(desired, others); err != nil {
			return decision{v1.PodReasonDeferred, err.Error()}
		}
	}
	return decision{}
}

// cpuRequestsChange: a resizable container of desired asks another cpu request than allocated
// holds (in a Guaranteed pod limits equal requests, so requests tell).
func cpuRequestsChange(desired, allocated *v1.Pod) bool {
	held := allocationFromPod(allocated)
	for name, r := range allocationFromPod(desired) {
		if !r.Requests.Cpu().Equal(held[name].Requests[v1.ResourceCPU]) {
			return true
		}
	}
	return false
}

// podRequests are the pod's effective requests as the scheduler sums them (init containers'
// peaks, sidecars, overhead).
func podRequests(pod *v1.Pod) v1.ResourceList {
	return resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
}
