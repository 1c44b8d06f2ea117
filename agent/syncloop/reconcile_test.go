package syncloop

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/podsource"
	"github.com/nodelet/nodelet/agent/podworkers"
)

// gatedPod is running with its only container ready; Ready says what the agent last wrote.
func gatedPod(gate v1.ConditionStatus, ready v1.ConditionStatus, message string) *v1.Pod {
	p := pod("gated")
	p.Spec.Containers = []v1.Container{{Name: "app"}}
	p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
	p.Status = v1.PodStatus{Phase: v1.PodRunning,
		ContainerStatuses: []v1.ContainerStatus{{Name: "app", Ready: true}},
		Conditions: []v1.PodCondition{
			{Type: "example.com/lb", Status: gate},
			{Type: v1.PodReady, Status: ready, Message: message},
		}}
	return p
}

// A status-only change from the apiserver wakes the pod's worker when a readiness gate's condition
// now contradicts Ready, and only then: the agent's own status writes come back the same way.
func TestReconcileWakesWorkerOnReadinessGateChange(t *testing.T) {
	w := &fakeWorkers{}
	ready := true
	l, updates, _ := newLoop(w, fakeRuntime{}, &ready)
	never := make(chan time.Time)
	step := func() { l.iteration(context.Background(), never, never) }

	notReady := `the status of pod readiness gate "example.com/lb" is not "True", but False`
	updates <- podsource.PodUpdate{Op: podsource.ADD, Pods: []*v1.Pod{gatedPod(v1.ConditionFalse, v1.ConditionFalse, notReady)}}
	step()
	w.take()

	// The agent's own write read back: nothing to do.
	updates <- podsource.PodUpdate{Op: podsource.RECONCILE, Pods: []*v1.Pod{gatedPod(v1.ConditionFalse, v1.ConditionFalse, notReady)}}
	step()
	if got := w.take(); len(got) != 0 {
		t.Fatalf("consistent status woke the worker: %+v", got)
	}

	flipped := gatedPod(v1.ConditionTrue, v1.ConditionFalse, notReady)
	updates <- podsource.PodUpdate{Op: podsource.RECONCILE, Pods: []*v1.Pod{flipped}}
	step()
	got := w.take()
	if len(got) != 1 || got[0].UpdateType != podworkers.SyncPodSync || got[0].Pod != flipped {
		t.Fatalf("gate flip: updates %+v, want one SyncPodSync carrying the new status", got)
	}
	if p, _ := l.Pods.GetPodByUID(flipped.UID); p != flipped {
		t.Fatal("pod manager kept the old status")
	}
}
