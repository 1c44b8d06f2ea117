package server

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestEventStore(t *testing.T) {
	now := time.Unix(1000, 0)
	s := &EventStore{PerPod: 3, now: func() time.Time { now = now.Add(time.Second); return now }}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}}
	s.Event(pod, v1.EventTypeNormal, "Pulled", "image present")
	s.Event(pod, v1.EventTypeWarning, "BackOff", "back-off restarting")
	s.Event(pod, v1.EventTypeWarning, "BackOff", "back-off restarting")
	s.Eventf(pod, v1.EventTypeNormal, "Started", "started %s", "nginx")
	s.Event(pod, v1.EventTypeNormal, "Killing", "stopping")
	s.Event(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"}}, v1.EventTypeNormal, "NodeReady", "x")
	got := s.PodEvents("default", "web")
	if len(got) != 3 || got[0].Reason != "BackOff" || got[0].Count != 2 || got[1].Message != "started nginx" || got[2].Reason != "Killing" {
		t.Fatalf("events: %+v", got)
	}
	if !got[0].LastTimestamp.After(got[0].FirstTimestamp.Time) {
		t.Fatal("a repeat did not move LastTimestamp")
	}
	s.Forget("default", "web")
	if len(s.PodEvents("default", "web")) != 0 {
		t.Fatal("Forget kept events")
	}
}

func TestPodList(t *testing.T) {
	pods := PodList(func() []*v1.Pod {
		return []*v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "x"}}, {ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "y"}}}
	})
	if p, ok := pods.Pod("y", "a"); !ok || p.Namespace != "y" {
		t.Fatal("Pod by namespace and name")
	}
	if _, ok := pods.Pod("z", "a"); ok {
		t.Fatal("found a pod in the wrong namespace")
	}
}
