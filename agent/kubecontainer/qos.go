package kubecontainer

import v1 "k8s.io/api/core/v1"

// PodQOSClass computes a pod's QoS class from its spec: Guaranteed when every container's cpu and
// memory limits equal its requests, BestEffort when none has any, Burstable otherwise. It ignores
// pod.Status.QOSClass, so the status manager (which writes that field) and the runtime manager
// (which sizes cgroups by it) agree on one rule.
func PodQOSClass(pod *v1.Pod) v1.PodQOSClass {
	guaranteed, any := true, false
	for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[r]
			lim, hasLim := c.Resources.Limits[r]
			if hasReq || hasLim {
				any = true
			}
			if !hasLim || (hasReq && req.Cmp(lim) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case !any:
		return v1.PodQOSBestEffort
	case guaranteed:
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}
