package podsync

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/podworkers"
)

func TestEvictedPodTerminatesFailedWithEvictionMessage(t *testing.T) {
	s, cri, st := newSyncer(t)
	cri.AddImage("busybox:1")
	pod := apiPod("")
	ctx := context.Background()
	if _, err := s.SyncPod(ctx, podworkers.SyncPodCreate, pod, nil); err != nil {
		t.Fatal(err)
	}
	if cri.RunningContainer("c") == "" {
		t.Fatal("pod not running")
	}
	const msg = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. "
	s.MarkEvicted(pod.UID, msg)
	one := int64(1)
	if err := s.SyncTerminatingPod(ctx, pod, &one); err != nil {
		t.Fatal(err)
	}
	if id := cri.RunningContainer("c"); id != "" {
		t.Fatalf("container %s still running after eviction", id)
	}
	got, _ := st.GetPodStatus(pod.UID)
	if got.Phase != v1.PodFailed || got.Reason != ReasonEvicted || got.Message != msg {
		t.Fatalf("after eviction: phase %q reason %q message %q", got.Phase, got.Reason, got.Message)
	}
	if terminal, err := s.SyncPod(ctx, podworkers.SyncPodSync, pod, nil); err != nil || !terminal {
		t.Fatalf("an evicted pod runs again: terminal %v err %v", terminal, err)
	}
}

func TestEvictionKeepsOutcomeOfPodThatAlreadySucceeded(t *testing.T) {
	s, cri, st := newSyncer(t)
	cri.AddImage("busybox:1")
	pod := apiPod("")
	ctx := context.Background()
	if _, err := s.SyncPod(ctx, podworkers.SyncPodCreate, pod, nil); err != nil {
		t.Fatal(err)
	}
	cri.ExitContainer(cri.RunningContainer("c"), 0)
	if terminal, err := s.SyncPod(ctx, podworkers.SyncPodSync, pod, nil); err != nil || !terminal {
		t.Fatalf("terminal %v err %v", terminal, err)
	}
	s.MarkEvicted(pod.UID, "late")
	if err := s.SyncTerminatingPod(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetPodStatus(pod.UID); got.Phase != v1.PodSucceeded || got.Reason != "" {
		t.Fatalf("a pod that succeeded before eviction: %q %q", got.Phase, got.Reason)
	}
}
