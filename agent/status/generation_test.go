package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// The pod's generation is reported as the status's observedGeneration and on every condition the
// agent sets; a status generated from an older copy of the pod does not lower it.
func TestGenerateObservedGeneration(t *testing.T) {
	pod := mkPod(v1.RestartPolicyAlways, nil, "a")
	pod.Generation = 3
	pod.Status.Conditions = []v1.PodCondition{{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, ObservedGeneration: 1}}
	in := Inputs{Reasons: kubecontainer.NewReasonCache(), Now: time.Now(),
		ResizeConditions: []v1.PodCondition{{Type: v1.PodResizePending, Status: v1.ConditionTrue, ObservedGeneration: 2}}}
	s := Generate(pod, ps(c("a", kubecontainer.StateRunning, 0, 0)), v1.PodStatus{}, in)
	if s.ObservedGeneration != 3 {
		t.Errorf("status observedGeneration %d, want 3", s.ObservedGeneration)
	}
	for _, cond := range s.Conditions {
		want := int64(3)
		switch cond.Type {
		case v1.DisruptionTarget:
			want = 1 // another's condition, kept as it is
		case v1.PodResizePending:
			want = 2 // the allocation manager's, for the spec it decided on
		}
		if cond.ObservedGeneration != want {
			t.Errorf("%s observedGeneration %d, want %d", cond.Type, cond.ObservedGeneration, want)
		}
	}
	for _, ct := range []v1.PodConditionType{v1.PodReady, v1.ContainersReady, v1.PodInitialized, v1.PodScheduled, v1.PodReadyToStartContainers} {
		if condition(s, ct).Type != ct {
			t.Errorf("no %s condition", ct)
		}
	}

	stale := pod.DeepCopy()
	stale.Generation = 2
	if got := Generate(stale, ps(c("a", kubecontainer.StateRunning, 0, 0)), s, in).ObservedGeneration; got != 3 {
		t.Errorf("older pod copy lowered observedGeneration to %d", got)
	}
}
