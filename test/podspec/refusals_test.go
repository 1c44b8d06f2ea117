package podspec

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// A container asking for a block volume's device is refused with the error the status shows
// (CreateContainerConfigError), and nothing is created.
func TestVolumeDevicesAreRefused(t *testing.T) {
	pod := basePod()
	pod.Spec.Volumes = []v1.Volume{{Name: "blk", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}
	pod.Spec.Containers[0].VolumeDevices = []v1.VolumeDevice{{Name: "blk", DevicePath: "/dev/xvda"}}
	got := syncOnce(t, pod)
	if got.err == nil || !strings.Contains(got.err.Error(), `volumeDevices: volume "blk" at /dev/xvda: block volumes are not supported`) ||
		got.container != nil {
		t.Fatalf("sync: %v, container %v", got.err, got.container)
	}
}
