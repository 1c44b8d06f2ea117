package podspec

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A container naming in volumeDevices a claim the volume manager has not set up as a block
// device (here: none is set up) is refused with the error the status shows
// (CreateContainerConfigError), and nothing is created.
func TestVolumeDevicesNeedABlockClaim(t *testing.T) {
	pod := basePod()
	pod.Spec.Volumes = []v1.Volume{{Name: "blk", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}
	pod.Spec.Containers[0].VolumeDevices = []v1.VolumeDevice{{Name: "blk", DevicePath: "/dev/xvda"}}
	got := syncOnce(t, pod)
	if got.err == nil || !strings.Contains(got.err.Error(), `cannot find volume "blk" to pass into container "c"`) ||
		got.container != nil {
		t.Fatalf("sync: %v, container %v", got.err, got.container)
	}
}

// Strict on a runtime whose Status does not say it honours the policy (the fake reports no
// runtime features) is refused with the kubelet's message rather than run with Merge.
func TestStrictSupplementalGroupsNeedsTheRuntime(t *testing.T) {
	pod := basePod()
	strict := v1.SupplementalGroupsPolicyStrict
	pod.Spec.SecurityContext = &v1.PodSecurityContext{SupplementalGroupsPolicy: &strict}
	got := syncOnce(t, pod)
	if got.err == nil || !strings.Contains(got.err.Error(), "SupplementalGroupsPolicy=Strict is not supported in this node") ||
		got.container != nil {
		t.Fatalf("sync: %v, container %v", got.err, got.container)
	}
	merge := v1.SupplementalGroupsPolicyMerge
	pod.Spec.SecurityContext.SupplementalGroupsPolicy = &merge
	if got := syncOnce(t, pod); got.err != nil || got.container == nil ||
		got.container.Linux.SecurityContext.SupplementalGroupsPolicy != runtimeapi.SupplementalGroupsPolicy_Merge ||
		got.sandbox.Linux.SecurityContext.SupplementalGroupsPolicy != runtimeapi.SupplementalGroupsPolicy_Merge {
		t.Fatalf("Merge: %v, container %v", got.err, got.container)
	}
}
