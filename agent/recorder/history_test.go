package recorder

import (
	"io"
	"log/slog"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
