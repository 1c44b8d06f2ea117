package recorder

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/test/harness/kubefake"
)

// The node's events are kept apart from pods': forgetting every pod must not drop them, a repeat
// is counted rather than stored twice, and a pod's events never show up as the node's.
func TestHistoryKeepsNodeEventsApartFromPods(t *testing.T) {
	l := NewHistory(NewSlog(slog.New(slog.NewTextHandler(io.Discard, nil))))
	node := &v1.ObjectReference{Kind: "Node", Name: "n1", UID: "n1"}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}

	l.Event(node, v1.EventTypeNormal, "Starting", "Starting kubelet.")
	l.Event(pod, v1.EventTypeNormal, "Scheduled", "on n1")
	l.Event(node, v1.EventTypeNormal, "NodeReady", "Node n1 status is now: NodeReady")
	l.Event(node, v1.EventTypeNormal, "NodeReady", "Node n1 status is now: NodeReady")
	l.Event(&v1.ObjectReference{Kind: "Pod", Name: "p", Namespace: "ns"}, v1.EventTypeNormal, "Other", "not the node")
	l.Forget(map[string]bool{})

	got := l.NodeEvents()
	if len(got) != 2 {
		t.Fatalf("node events = %d, want 2 (Starting, NodeReady×2): %+v", len(got), got)
	}
	if got[0].Reason != "Starting" || got[1].Reason != "NodeReady" || got[1].Count != 2 {
		t.Errorf("node events = %s/%d, %s/%d; want Starting/1, NodeReady/2", got[0].Reason, got[0].Count, got[1].Reason, got[1].Count)
	}
	if got[1].InvolvedObject.Kind != "Node" || got[1].InvolvedObject.Name != "n1" {
		t.Errorf("involved object = %+v, want the node's reference", got[1].InvolvedObject)
	}
	if evs := l.PodEvents("ns", "p"); len(evs) != 0 {
		t.Errorf("pod events after Forget = %+v, want none", evs)
	}
}

// A pod keeps its last eventsPerPod events, oldest first; a repeat (same type, reason and message)
// of the last one counts up and moves its LastTimestamp, and a pod no longer known is forgotten.
func TestHistoryKeepsEachPodsLastEvents(t *testing.T) {
	l := NewHistory(NewSlog(slog.New(slog.NewTextHandler(io.Discard, nil))))
	sec := int64(1000)
	l.now = func() metav1.Time { sec++; return metav1.Unix(sec, 0) }
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "u1"}}

	l.Event(pod, v1.EventTypeNormal, "Pulled", "image present")
	l.Event(pod, v1.EventTypeWarning, "BackOff", "back-off restarting")
	l.Event(pod, v1.EventTypeWarning, "BackOff", "back-off restarting")
	l.Event(pod, v1.EventTypeNormal, "BackOff", "back-off restarting") // another type: not a repeat
	l.Eventf(pod, v1.EventTypeNormal, "Started", "started %s", "nginx")
	got := l.PodEvents("default", "web")
	if len(got) != 4 || got[1].Reason != "BackOff" || got[1].Count != 2 || got[2].Type != v1.EventTypeNormal || got[3].Message != "started nginx" {
		t.Fatalf("events: %+v", got)
	}
	if !got[1].LastTimestamp.After(got[1].FirstTimestamp.Time) {
		t.Error("a repeat did not move LastTimestamp")
	}
	if o := got[0].InvolvedObject; o.Kind != "Pod" || o.APIVersion != "v1" || o.UID != "u1" || o.Name != "web" {
		t.Errorf("involved object = %+v", o)
	}

	for i := 0; i < eventsPerPod+5; i++ {
		l.Eventf(pod, v1.EventTypeNormal, "Tick", "tick %d", i)
	}
	got = l.PodEvents("default", "web")
	if len(got) != eventsPerPod || got[len(got)-1].Message != fmt.Sprintf("tick %d", eventsPerPod+4) || got[0].Message != "tick 5" {
		t.Fatalf("after %d more: %d events, first %q, last %q", eventsPerPod+5, len(got), got[0].Message, got[len(got)-1].Message)
	}

	l.Forget(map[string]bool{"default/web": true})
	if len(l.PodEvents("default", "web")) == 0 {
		t.Fatal("Forget dropped a pod still known")
	}
	l.Forget(map[string]bool{})
	if len(l.PodEvents("default", "web")) != 0 {
		t.Fatal("Forget kept a pod no longer known")
	}
}

// Standalone a node's events are only logged and kept: there is no Recorder to run. In a cluster
// a Recorder posts them.
func TestForNode(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if _, r := ForNode(kubefake.New(), "n1", log); r == nil {
		t.Fatal("no Recorder with an apiserver")
	}
	h, r := ForNode(nil, "n1", log)
	if r != nil {
		t.Fatal("a Recorder without an apiserver")
	}
	h.Event(&v1.ObjectReference{Kind: "Node", Name: "n1", UID: "n1"}, v1.EventTypeNormal, "Starting", "Starting kubelet.")
	if got := h.NodeEvents(); len(got) != 1 || got[0].Reason != "Starting" {
		t.Fatalf("node events %+v", got)
	}
}
