package status

import (
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// TestVolumeMountStatuses: every container's status lists its volumeMounts as the kubelet does,
// a read-only one with recursiveReadOnly Enabled or Disabled as it resolves on the pod's handler,
// whether the container was made yet or not, init and debug containers too.
func TestVolumeMountStatuses(t *testing.T) {
	mode := func(m v1.RecursiveReadOnlyMode) *v1.RecursiveReadOnlyMode { return &m }
	pod := mkPod(v1.RestartPolicyAlways, []string{"init"}, "app", "waiting")
	mounts := []v1.VolumeMount{
		{Name: "rw", MountPath: "/rw"},
		{Name: "ro", MountPath: "/ro", ReadOnly: true},
		{Name: "off", MountPath: "/off", ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyDisabled)},
		{Name: "maybe", MountPath: "/maybe", ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyIfPossible)},
		{Name: "must", MountPath: "/must", ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyEnabled)},
	}
	pod.Spec.InitContainers[0].VolumeMounts = mounts
	pod.Spec.Containers[0].VolumeMounts = mounts
	pod.Spec.Containers[1].VolumeMounts = mounts
	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{
		Name: "debug", Image: "busybox", VolumeMounts: mounts}}}
	status := ps(c("init", kubecontainer.StateExited, 0, 0), c("app", kubecontainer.StateRunning, 0, 0))
	for _, supported := range []bool{true, false} {
		recursive := v1.RecursiveReadOnlyDisabled
		if supported {
			recursive = v1.RecursiveReadOnlyEnabled
		}
		want := []v1.VolumeMountStatus{
			{Name: "rw", MountPath: "/rw"},
			{Name: "ro", MountPath: "/ro", ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyDisabled)},
			{Name: "off", MountPath: "/off", ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyDisabled)},
			{Name: "maybe", MountPath: "/maybe", ReadOnly: true, RecursiveReadOnly: mode(recursive)},
			// Unsupported, it cannot be made: the container is refused, and the status says Disabled.
			{Name: "must", MountPath: "/must", ReadOnly: true, RecursiveReadOnly: mode(recursive)},
		}
		s := Generate(pod, status, v1.PodStatus{}, Inputs{Reasons: kubecontainer.NewReasonCache(), Now: time.Unix(2000, 0),
			RecursiveReadOnlyMounts: supported})
		all := append(append(append([]v1.ContainerStatus{}, s.InitContainerStatuses...), s.ContainerStatuses...), s.EphemeralContainerStatuses...)
		if len(all) != 4 {
			t.Fatalf("%d container statuses", len(all))
		}
		for _, cs := range all {
			if !reflect.DeepEqual(cs.VolumeMounts, want) {
				t.Errorf("supported %v: %s: volumeMounts %+v, want %+v", supported, cs.Name, cs.VolumeMounts, want)
			}
		}
	}
	none := Generate(mkPod(v1.RestartPolicyAlways, nil, "a"), ps(), v1.PodStatus{}, Inputs{Reasons: kubecontainer.NewReasonCache()})
	if none.ContainerStatuses[0].VolumeMounts != nil {
		t.Errorf("a container without mounts: %+v", none.ContainerStatuses[0].VolumeMounts)
	}
}
