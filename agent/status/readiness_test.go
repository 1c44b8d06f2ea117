package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A readiness flip reaches the recorded status at once, with the pod's conditions, without a
// sync of the pod (whose worker may be killing it for its whole grace period).
func TestSetContainerReadiness(t *testing.T) {
	pod := mkPod(v1.RestartPolicyAlways, nil, "a", "b")
	then, now := metav1.NewTime(time.Unix(1000, 0)), time.Unix(2000, 0)
	running := v1.ContainerState{Running: &v1.ContainerStateRunning{}}
	m := NewManager(nil, nil, nil)
	m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodRunning,
		ContainerStatuses: []v1.ContainerStatus{
			{Name: "a", ContainerID: "nodelet://a-id", State: running, Ready: true},
			{Name: "b", ContainerID: "nodelet://b-id", State: running, Ready: true}},
		Conditions: []v1.PodCondition{
			{Type: v1.ContainersReady, Status: v1.ConditionTrue, LastTransitionTime: then},
			{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: then},
			{Type: v1.PodScheduled, Status: v1.ConditionTrue, LastTransitionTime: then}}})

	m.SetContainerReadiness(pod.UID, "b-id", false, now)
	got, _ := m.GetPodStatus(pod.UID)
	if !got.ContainerStatuses[0].Ready || got.ContainerStatuses[1].Ready {
		t.Fatalf("container readiness %+v", got.ContainerStatuses)
	}
	for _, c := range got.Conditions {
		switch c.Type {
		case v1.ContainersReady, v1.PodReady:
			if c.Status != v1.ConditionFalse || c.Reason != "ContainersNotReady" ||
				c.Message != "containers with unready status: [b]" || !c.LastTransitionTime.Time.Equal(now) {
				t.Errorf("condition %+v", c)
			}
		case v1.PodScheduled:
			if c.Status != v1.ConditionTrue || !c.LastTransitionTime.Equal(&then) {
				t.Errorf("condition %+v changed", c)
			}
		}
	}
	// Ready again; an unknown container or pod changes nothing.
	m.SetContainerReadiness(pod.UID, "b-id", true, now.Add(time.Second))
	m.SetContainerReadiness(pod.UID, "gone-id", false, now)
	m.SetContainerReadiness("other-uid", "a-id", false, now)
	got, _ = m.GetPodStatus(pod.UID)
	for _, c := range got.Conditions {
		if c.Status != v1.ConditionTrue {
			t.Errorf("condition %+v after the container is ready again", c)
		}
	}
}
