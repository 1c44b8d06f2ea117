package podvalidation

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Fields of features the kubelet 1.34 keeps off by default, and pod-level resources, refuse a
// static pod by name.
func TestValidateStaticPodRefusesUnsupportedFields(t *testing.T) {
	never := v1.ContainerRestartPolicyNever
	for _, tt := range []struct {
		name   string
		mutate func(*v1.Pod)
		want   string
	}{
		{"pod-level resources", func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: resource.MustParse("1Gi")}}
		}, "spec.resources: Forbidden: pod-level resources are not supported on the node"},
		{"hostnameOverride", func(p *v1.Pod) { h := "other"; p.Spec.HostnameOverride = &h },
			"spec.hostnameOverride: Forbidden: is not supported on this node"},
		{"restartPolicyRules", func(p *v1.Pod) {
			p.Spec.Containers[0].RestartPolicy = &never
			p.Spec.Containers[0].RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
				ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}}}}
		}, "spec.containers[0].restartPolicyRules: Forbidden: is not supported on this node"},
		{"init restartPolicyRules", func(p *v1.Pod) {
			p.Spec.InitContainers[0].RestartPolicyRules = []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart}}
		}, "spec.initContainers[0].restartPolicyRules: Forbidden: is not supported on this node"},
		{"stopSignal", func(p *v1.Pod) {
			s := v1.SIGUSR1
			p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{StopSignal: &s}
		}, "spec.containers[0].lifecycle.stopSignal: Forbidden: is not supported on this node"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := goodPod()
			tt.mutate(p)
			got := ValidateStaticPod(p).ToAggregate()
			if got == nil || !strings.Contains(got.Error(), tt.want) {
				t.Fatalf("error %v\ndoes not contain %q", got, tt.want)
			}
		})
	}
	// The regular container's restartPolicy keeps its one error.
	p := goodPod()
	p.Spec.Containers[0].RestartPolicy = &never
	if errs := ValidateStaticPod(p); len(errs) != 1 || errs[0].Error() != "spec.containers[0].restartPolicy: Forbidden: may not be set for non-init containers" {
		t.Fatalf("errors %v", errs)
	}
	if errs := ValidateStaticPod(goodPod()); len(errs) != 0 {
		t.Fatalf("good pod refused: %v", errs)
	}
}

// Pods from the API server get the admission reason of the first field refused.
func TestUnsupportedReasons(t *testing.T) {
	p := goodPod()
	if r, errs := Unsupported(&p.Spec, nil); r != "" || len(errs) != 0 {
		t.Fatalf("good pod: %q %v", r, errs)
	}
	never := v1.ContainerRestartPolicyNever
	p.Spec.Containers[0].RestartPolicy = &never
	if r, errs := Unsupported(&p.Spec, nil); r != ContainerRestartRulesNotSupported || len(errs) != 1 {
		t.Fatalf("container restartPolicy: %q %v", r, errs)
	}
	p.Spec.Resources = &v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}
	if r, errs := Unsupported(&p.Spec, nil); r != PodLevelResourcesNotSupported || len(errs) != 2 {
		t.Fatalf("pod-level resources: %q %v", r, errs)
	}
}
