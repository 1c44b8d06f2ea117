package podvalidation

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Reasons a pod from the API server is rejected at admission for a field this node does not run.
// They follow the kubelet's <feature>NotSupported admission reasons; PodLevelResourcesNotSupported
// is the kubelet's own.
const (
	PodLevelResourcesNotSupported     = "PodLevelResourcesNotSupported"
	HostnameOverrideNotSupported      = "HostnameOverrideNotSupported"
	ContainerRestartRulesNotSupported = "ContainerRestartRulesNotSupported"
	ContainerStopSignalsNotSupported  = "ContainerStopSignalsNotSupported"
)

// notSupported is the detail of a refused field that the API lets through.
const notSupported = "is not supported on this node"

// Unsupported finds the fields of a pod's spec that this node refuses rather than ignore: those of
// features the kubelet 1.34 leaves off by default (HostnameOverride, ContainerRestartRules,
// ContainerStopSignals), and pod-level resources, which the agent does not apply to the QoS class,
// the containers' limits and eviction. reason is the admission reason of the first one found.
// Static pods get the errors from ValidateStaticPod, pods from the API server at admission.
func Unsupported(spec *v1.PodSpec, fld *field.Path) (reason string, errs field.ErrorList) {
	return unsupported(spec, fld, true)
}

// unsupported is Unsupported; regularRestartPolicy false leaves a regular container's restartPolicy
// to validateContainer, which refuses it for static pods and debug containers alike.
func unsupported(spec *v1.PodSpec, fld *field.Path, regularRestartPolicy bool) (reason string, errs field.ErrorList) {
	add := func(r string, err *field.Error) {
		if reason == "" {
			reason = r
		}
		errs = append(errs, err)
	}
	if r := spec.Resources; r != nil && len(r.Requests)+len(r.Limits) > 0 {
		add(PodLevelResourcesNotSupported, field.Forbidden(fld.Child("resources"), "pod-level resources are not supported on the node"))
	}
	if spec.HostnameOverride != nil {
		add(HostnameOverrideNotSupported, field.Forbidden(fld.Child("hostnameOverride"), notSupported))
	}
	for _, list := range []struct {
		name string
		cs   []v1.Container
	}{{"initContainers", spec.InitContainers}, {"containers", spec.Containers}} {
		for i := range list.cs {
			c, idx := &list.cs[i], fld.Child(list.name).Index(i)
			if regularRestartPolicy && list.name == "containers" && c.RestartPolicy != nil {
				add(ContainerRestartRulesNotSupported, field.Forbidden(idx.Child("restartPolicy"), "may not be set for non-init containers"))
			}
			if len(c.RestartPolicyRules) > 0 {
				add(ContainerRestartRulesNotSupported, field.Forbidden(idx.Child("restartPolicyRules"), notSupported))
			}
			if c.Lifecycle != nil && c.Lifecycle.StopSignal != nil {
				add(ContainerStopSignalsNotSupported, field.Forbidden(idx.Child("lifecycle", "stopSignal"), notSupported))
			}
		}
	}
	return reason, errs
}
