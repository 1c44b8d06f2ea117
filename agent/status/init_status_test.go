package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

func generate(pod *v1.Pod, st *kubecontainer.PodStatus) v1.PodStatus {
	return Generate(pod, st, v1.PodStatus{}, Inputs{Reasons: kubecontainer.NewReasonCache(), RuntimeName: "fake", Now: time.Unix(2000, 0)})
}

func condition(s v1.PodStatus, t v1.PodConditionType) v1.PodCondition {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c
		}
	}
	return v1.PodCondition{}
}

func waitingReason(cs v1.ContainerStatus) string {
	if cs.State.Waiting == nil {
		return ""
	}
	return cs.State.Waiting.Reason
}

func TestInitContainersStatus(t *testing.T) {
	R, E := kubecontainer.StateRunning, kubecontainer.StateExited
	pod := mkPod(v1.RestartPolicyAlways, []string{"init1", "init2", "init3"}, "a", "b")

	// Nothing made yet: every container waits for initialization, the first init container too.
	s := generate(pod, ps())
	for _, cs := range append(s.InitContainerStatuses, s.ContainerStatuses...) {
		if waitingReason(cs) != kubecontainer.ReasonPodInitializing || cs.Ready {
			t.Errorf("%s: waiting %q ready %v, want PodInitializing", cs.Name, waitingReason(cs), cs.Ready)
		}
	}
	if c := condition(s, v1.PodInitialized); c.Status != v1.ConditionFalse || c.Reason != "ContainersNotInitialized" ||
		c.Message != "containers with incomplete status: [init1 init2 init3]" {
		t.Errorf("initialized %+v", c)
	}

	// init1 succeeded, init2 runs.
	s = generate(pod, ps(c("init1", E, 0, 0), c("init2", R, 0, 0)))
	got := []bool{s.InitContainerStatuses[0].Ready, s.InitContainerStatuses[1].Ready, s.InitContainerStatuses[2].Ready}
	if got[0] != true || got[1] || got[2] {
		t.Errorf("init ready %v, want [true false false]", got)
	}
	if s.InitContainerStatuses[0].State.Terminated == nil || s.InitContainerStatuses[0].State.Terminated.Reason != "Completed" {
		t.Errorf("init1 state %+v", s.InitContainerStatuses[0].State)
	}
	if r := waitingReason(s.InitContainerStatuses[2]); r != kubecontainer.ReasonPodInitializing {
		t.Errorf("init3 waits with %q", r)
	}
	if r := waitingReason(s.ContainerStatuses[0]); r != kubecontainer.ReasonPodInitializing {
		t.Errorf("app waits with %q", r)
	}
	if c := condition(s, v1.PodInitialized); c.Status != v1.ConditionFalse || c.Message != "containers with incomplete status: [init2 init3]" {
		t.Errorf("initialized %+v", c)
	}
	for _, ct := range []v1.PodConditionType{v1.PodReady, v1.ContainersReady} {
		if c := condition(s, ct); c.Status != v1.ConditionFalse || c.Reason != "ContainersNotReady" || c.Message != "containers with unready status: [a b]" {
			t.Errorf("%s %+v", ct, c)
		}
	}

	// A failed init container is not ready and stays incomplete.
	s = generate(pod, ps(c("init1", E, 0, 0), c("init2", E, 1, 0)))
	if s.InitContainerStatuses[1].Ready {
		t.Error("failed init container ready")
	}

	// All done, one app container up.
	s = generate(pod, ps(c("init1", E, 0, 0), c("init2", E, 0, 0), c("init3", E, 0, 0), c("a", R, 0, 0)))
	if c := condition(s, v1.PodInitialized); c.Status != v1.ConditionTrue || c.Reason != "" || c.Message != "" {
		t.Errorf("initialized %+v", c)
	}
	if r := waitingReason(s.ContainerStatuses[1]); r != kubecontainer.ReasonPodInitializing {
		t.Errorf("b waits with %q (the kubelet keeps PodInitializing in pods with init containers)", r)
	}
	if c := condition(s, v1.PodReady); c.Message != "containers with unready status: [b]" {
		t.Errorf("ready %+v", c)
	}
	s = generate(pod, ps(c("init1", E, 0, 0), c("init2", E, 0, 0), c("init3", E, 0, 0), c("a", R, 0, 0), c("b", R, 0, 0)))
	if c := condition(s, v1.PodReady); c.Status != v1.ConditionTrue || c.Reason != "" || c.Message != "" {
		t.Errorf("ready %+v", c)
	}
}

func TestConditionsOfEndedPods(t *testing.T) {
	E := kubecontainer.StateExited
	done := generate(mkPod(v1.RestartPolicyNever, []string{"i"}, "a"), ps(c("i", E, 0, 0), c("a", E, 0, 0)))
	if done.Phase != v1.PodSucceeded {
		t.Fatalf("phase %s", done.Phase)
	}
	if c := condition(done, v1.PodInitialized); c.Status != v1.ConditionTrue || c.Reason != "PodCompleted" {
		t.Errorf("initialized %+v", c)
	}
	if c := condition(done, v1.ContainersReady); c.Status != v1.ConditionFalse || c.Reason != "PodCompleted" || c.Message != "" {
		t.Errorf("containers ready %+v", c)
	}
	failed := generate(mkPod(v1.RestartPolicyNever, nil, "a"), ps(c("a", E, 3, 0)))
	if c := condition(failed, v1.PodReady); failed.Phase != v1.PodFailed || c.Status != v1.ConditionFalse || c.Reason != "PodFailed" {
		t.Errorf("phase %s ready %+v", failed.Phase, c)
	}
}

func TestSidecarConditions(t *testing.T) {
	R, E := kubecontainer.StateRunning, kubecontainer.StateExited
	pod := sidecarPod()
	s := generate(pod, ps(c("side", R, 0, 0)))
	if c := condition(s, v1.PodInitialized); c.Status != v1.ConditionTrue {
		t.Errorf("initialized %+v with the sidecar started", c)
	}
	// The sidecar restarts after the app ran: the pod stays initialized, and not ready.
	s = generate(pod, ps(c("side", E, 1, 0), c("a", R, 0, 0)))
	if c := condition(s, v1.PodInitialized); c.Status != v1.ConditionTrue {
		t.Errorf("initialized %+v", c)
	}
	if c := condition(s, v1.ContainersReady); c.Status != v1.ConditionFalse || c.Message != "containers with unready status: [side]" {
		t.Errorf("containers ready %+v", c)
	}
}

func TestReadinessGatesAndOthersConditions(t *testing.T) {
	R := kubecontainer.StateRunning
	pod := mkPod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
	pod.Status.Conditions = []v1.PodCondition{
		{Type: v1.PodReady, Status: v1.ConditionTrue}, // ours: recomputed, never copied
		{Type: v1.DisruptionTarget, Status: v1.ConditionTrue, Reason: "EvictionByEvictionAPI"},
	}
	s := generate(pod, ps(c("a", R, 0, 0)))
	if c := condition(s, v1.ContainersReady); c.Status != v1.ConditionTrue {
		t.Errorf("containers ready %+v", c)
	}
	if c := condition(s, v1.PodReady); c.Status != v1.ConditionFalse || c.Reason != "ReadinessGatesNotReady" ||
		c.Message != `corresponding condition of pod readiness gate "example.com/lb" does not exist.` {
		t.Errorf("ready %+v", c)
	}
	if c := condition(s, v1.DisruptionTarget); c.Reason != "EvictionByEvictionAPI" {
		t.Errorf("others' condition lost: %+v", s.Conditions)
	}
	n := 0
	for _, c := range s.Conditions {
		if c.Type == v1.PodReady {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d Ready conditions", n)
	}

	pod.Status.Conditions = append(pod.Status.Conditions, v1.PodCondition{Type: "example.com/lb", Status: v1.ConditionFalse})
	if c := condition(generate(pod, ps(c("a", R, 0, 0))), v1.PodReady); c.Status != v1.ConditionFalse ||
		c.Message != `the status of pod readiness gate "example.com/lb" is not "True", but False` {
		t.Errorf("ready %+v", c)
	}
	pod.Status.Conditions[2].Status = v1.ConditionTrue
	if c := condition(generate(pod, ps(c("a", R, 0, 0))), v1.PodReady); c.Status != v1.ConditionTrue {
		t.Errorf("ready %+v", c)
	}
}
