package podsync

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodelet/nodelet/agent/podworkers"
)

type fakeRecorder struct {
	mu     sync.Mutex
	events []string
}

func (r *fakeRecorder) Eventf(_ runtime.Object, typ, reason, format string, args ...interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, typ+" "+reason+" "+fmt.Sprintf(format, args...))
}

func TestActiveDeadlineFailsAndKillsPod(t *testing.T) {
	s, cri, st := newSyncer(t)
	rec := &fakeRecorder{}
	now := time.Now()
	s.Recorder, s.Now = rec, func() time.Time { return now }
	cri.AddImage("busybox:1")
	pod := apiPod("")
	deadline := int64(30)
	pod.Spec.ActiveDeadlineSeconds = &deadline
	ctx := context.Background()

	if terminal, err := s.SyncPod(ctx, podworkers.SyncPodCreate, pod, nil); err != nil || terminal {
		t.Fatalf("before the deadline: terminal %v err %v", terminal, err)
	}
	if cri.RunningContainer("c") == "" {
		t.Fatal("pod not running before its deadline")
	}
	now = now.Add(29 * time.Second)
	if terminal, err := s.SyncPod(ctx, podworkers.SyncPodSync, pod, nil); err != nil || terminal {
		t.Fatalf("a second before the deadline: terminal %v err %v", terminal, err)
	}

	now = now.Add(time.Second)
	terminal, err := s.SyncPod(ctx, podworkers.SyncPodSync, pod, nil)
	if err != nil || !terminal {
		t.Fatalf("at the deadline: terminal %v err %v", terminal, err)
	}
	want := func(when string) {
		t.Helper()
		got, _ := st.GetPodStatus(pod.UID)
		if got.Phase != v1.PodFailed || got.Reason != ReasonDeadlineExceeded || got.Message != MessageDeadlineExceeded {
			t.Fatalf("%s: phase %q reason %q message %q", when, got.Phase, got.Reason, got.Message)
		}
	}
	want("at the deadline")
	// The worker then terminates the pod: its containers are killed and the outcome stays, whatever
	// the killed containers' exit codes say.
	if err := s.SyncTerminatingPod(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	if id := cri.RunningContainer("c"); id != "" {
		t.Fatalf("container %s still running after the deadline", id)
	}
	want("after the kill")
	if terminal, err := s.SyncPod(ctx, podworkers.SyncPodSync, pod, nil); err != nil || !terminal {
		t.Fatalf("after the kill: terminal %v err %v", terminal, err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.events) != 1 || rec.events[0] != "Normal DeadlineExceeded "+MessageDeadlineExceeded {
		t.Fatalf("events %q, want one DeadlineExceeded", rec.events)
	}
}

func TestActiveDeadlineKeepsOtherOutcomes(t *testing.T) {
	s, cri, st := newSyncer(t)
	now := time.Now()
	s.Now = func() time.Time { return now }
	cri.AddImage("busybox:1")
	pod := apiPod("")
	deadline := int64(10)
	pod.Spec.ActiveDeadlineSeconds = &deadline
	ctx := context.Background()
	if _, err := s.SyncPod(ctx, podworkers.SyncPodCreate, pod, nil); err != nil {
		t.Fatal(err)
	}
	cri.ExitContainer(cri.RunningContainer("c"), 0)
	if terminal, err := s.SyncPod(ctx, podworkers.SyncPodSync, pod, nil); err != nil || !terminal {
		t.Fatalf("terminal %v err %v", terminal, err)
	}
	now = now.Add(time.Minute)
	if err := s.SyncTerminatingPod(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetPodStatus(pod.UID); got.Phase != v1.PodSucceeded || got.Reason != "" {
		t.Fatalf("a pod that succeeded before its deadline: %q %q", got.Phase, got.Reason)
	}
}

func TestPastActiveDeadlineUsesAPIStartTime(t *testing.T) {
	pod := apiPod(v1.PodRunning)
	now := time.Now()
	deadline := int64(5)
	pod.Spec.ActiveDeadlineSeconds = &deadline
	if PastActiveDeadline(pod, v1.PodStatus{}, now) {
		t.Fatal("a pod never started is past its deadline")
	}
	started := metav1.NewTime(now.Add(-6 * time.Second))
	pod.Status.StartTime = &started
	if !PastActiveDeadline(pod, v1.PodStatus{}, now) {
		t.Fatal("the apiserver's start time is not used when the agent kept none")
	}
	kept := metav1.NewTime(now.Add(-time.Second))
	if PastActiveDeadline(pod, v1.PodStatus{StartTime: &kept}, now) {
		t.Fatal("the kept start time is not preferred")
	}
	pod.Spec.ActiveDeadlineSeconds = nil
	if PastActiveDeadline(pod, v1.PodStatus{}, now) {
		t.Fatal("a pod without a deadline is past it")
	}
}
