package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// A pod from the API server setting a field this node refuses is rejected with the field's name.
func TestUnsupportedFields(t *testing.T) {
	h := New(func() (*v1.Node, error) { return node(), nil }, func() v1.ResourceList { return alloc })
	host := "other"
	r := h.Admit(mkPod("a", func(p *v1.Pod) { p.Spec.HostnameOverride = &host }), nil)
	if r.Admit || r.Reason != "HostnameOverrideNotSupported" || r.Message != "spec.hostnameOverride: Forbidden: is not supported on this node" {
		t.Errorf("hostnameOverride: %+v", r)
	}
	r = h.Admit(mkPod("b", func(p *v1.Pod) { p.Spec.Resources = &v1.ResourceRequirements{Limits: rl("memory", "1Gi")} }), nil)
	if r.Admit || r.Reason != "PodLevelResourcesNotSupported" ||
		r.Message != "spec.resources: Forbidden: pod-level resources are not supported on the node" {
		t.Errorf("pod-level resources: %+v", r)
	}
	always := v1.ContainerRestartPolicyAlways
	r = h.Admit(mkPod("c", func(p *v1.Pod) { p.Spec.Containers[0].RestartPolicy = &always }), nil)
	if r.Admit || r.Reason != "ContainerRestartRulesNotSupported" ||
		r.Message != "spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers" {
		t.Errorf("container restartPolicy: %+v", r)
	}
	sig := v1.SIGUSR1
	r = h.Admit(mkPod("d", func(p *v1.Pod) { p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{StopSignal: &sig} }), nil)
	if r.Admit || r.Reason != "ContainerStopSignalsNotSupported" {
		t.Errorf("stopSignal: %+v", r)
	}
	if r := h.Admit(mkPod("e"), nil); !r.Admit {
		t.Errorf("plain pod: %+v", r)
	}
}
