package podsync

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/podworkers"
)

// TestStatusReportsRecursiveReadOnly: the published status.containerStatuses[].volumeMounts say
// Enabled for an IfPossible mount when the pod's handler takes recursive read-only mounts, and
// Disabled when it does not.
func TestStatusReportsRecursiveReadOnly(t *testing.T) {
	for _, supported := range []bool{true, false} {
		s, cri, st := newSyncer(t)
		cri.AddImage("busybox:1")
		asked := 0
		s.RecursiveReadOnly = func(context.Context, *v1.Pod) bool { asked++; return supported }
		pod := apiPod("")
		pod.Spec.Volumes = []v1.Volume{{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: t.TempDir()}}}}
		mode := v1.RecursiveReadOnlyIfPossible
		pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "host", MountPath: "/h", ReadOnly: true, RecursiveReadOnly: &mode}}
		if _, err := s.SyncPod(context.Background(), podworkers.SyncPodCreate, pod, nil); err != nil {
			t.Fatal(err)
		}
		got, _ := st.GetPodStatus(pod.UID)
		want := v1.RecursiveReadOnlyDisabled
		if supported {
			want = v1.RecursiveReadOnlyEnabled
		}
		vms := got.ContainerStatuses[0].VolumeMounts
		if asked == 0 || len(vms) != 1 || vms[0].Name != "host" || !vms[0].ReadOnly || vms[0].RecursiveReadOnly == nil || *vms[0].RecursiveReadOnly != want {
			t.Fatalf("supported %v: volumeMounts %+v (asked %d times), want recursiveReadOnly %s", supported, vms, asked, want)
		}
	}
}
