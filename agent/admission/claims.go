package admission

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// FailedPrepareDynamicResources is the reason the kubelet gives a pod whose resource claims it
// cannot prepare.
const FailedPrepareDynamicResources = "FailedPrepareDynamicResources"

// AdmitResourceClaims refuses a pod that asks for devices through dynamic resource allocation
// (spec.resourceClaims, a container's resources.claims, a claim the scheduler made for its extended
// resources): nodelet has no DRA drivers, so nothing could prepare the devices, and the kubelet
// never runs a pod without them. Where the kubelet would keep the pod pending and retry, a node
// that can never have the drivers fails it at once, with the kubelet's reason and the shape of the
// message it gives when a claim's driver is not registered.
func AdmitResourceClaims(pod *v1.Pod) Result {
	claim, ok := "", true
	switch {
	case len(pod.Spec.ResourceClaims) > 0:
		claim = pod.Spec.ResourceClaims[0].Name
	case pod.Status.ExtendedResourceClaimStatus != nil:
		claim = pod.Status.ExtendedResourceClaimStatus.ResourceClaimName
	case pod.Spec.Resources != nil && len(pod.Spec.Resources.Claims) > 0:
		claim = pod.Spec.Resources.Claims[0].Name
	default:
		claim, ok = containerClaim(pod)
	}
	if !ok {
		return Result{Admit: true}
	}
	return Result{Reason: FailedPrepareDynamicResources,
		Message: fmt.Sprintf("Failed to prepare dynamic resources: prepare dynamic resources: no DRA driver is registered for resource claim %q", claim)}
}

// containerClaim is the first claim a container names. The API server accepts only names of the
// pod's resourceClaims there, but a pod from a file or URL must not slip past on a missing one.
func containerClaim(pod *v1.Pod) (string, bool) {
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if cl := cs[i].Resources.Claims; len(cl) > 0 {
				return cl[0].Name, true
			}
		}
	}
	return "", false
}
