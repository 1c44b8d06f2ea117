package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestAdmitResourceClaims(t *testing.T) {
	const prefix = "Failed to prepare dynamic resources: prepare dynamic resources: no DRA driver is registered for resource claim "
	tmpl := "gpu-template"
	podClaim := func(p *v1.Pod) {
		p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &tmpl}}
	}
	containerUses := func(name string) podOpt {
		return func(p *v1.Pod) { p.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: name}} }
	}
	cases := []struct {
		name string
		pod  *v1.Pod
		want Result
	}{
		{"no claims", mkPod("a", requests("cpu", "1")), admitted()},
		{"pod claim used by a container", mkPod("a", podClaim, containerUses("gpu")),
			rejected(FailedPrepareDynamicResources, prefix+`"gpu"`)},
		{"pod claim no container uses", mkPod("a", podClaim), rejected(FailedPrepareDynamicResources, prefix+`"gpu"`)},
		{"container claim alone", mkPod("a", containerUses("nic")), rejected(FailedPrepareDynamicResources, prefix+`"nic"`)},
		{"init container claim", mkPod("a", initContainer("init", false), func(p *v1.Pod) {
			p.Spec.InitContainers[0].Resources.Claims = []v1.ResourceClaim{{Name: "fpga"}}
		}), rejected(FailedPrepareDynamicResources, prefix+`"fpga"`)},
		{"pod-level resources claim", mkPod("a", func(p *v1.Pod) {
			p.Spec.Resources = &v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "x"}}}
		}), rejected(FailedPrepareDynamicResources, prefix+`"x"`)},
		{"extended resources backed by a claim", mkPod("a", func(p *v1.Pod) {
			p.Status.ExtendedResourceClaimStatus = &v1.PodExtendedResourceClaimStatus{ResourceClaimName: "a-extended-resources-xyz"}
		}), rejected(FailedPrepareDynamicResources, prefix+`"a-extended-resources-xyz"`)},
		{"a static pod too", mkPod("a", static, podClaim), rejected(FailedPrepareDynamicResources, prefix+`"gpu"`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := AdmitResourceClaims(tc.pod); got != tc.want {
				t.Fatalf("AdmitResourceClaims = %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
