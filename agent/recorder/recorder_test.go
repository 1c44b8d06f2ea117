package recorder

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

type call struct {
	verb, namespace, name string
	ev                    *v1.Event
	patch                 map[string]any
}

type sink struct {
	mu        sync.Mutex
	calls     []call
	failFirst int   // Create fails this many times first
	patchErr  error // Patch answers this
	ns        string
}

func (s *sink) Create(_ context.Context, ev *v1.Event, _ metav1.CreateOptions) (*v1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failFirst > 0 {
		s.failFirst--
		return nil, errors.New("connection refused")
	}
	s.calls = append(s.calls, call{verb: "create", namespace: s.ns, name: ev.Name, ev: ev.DeepCopy()})
	return ev, nil
}

func (s *sink) Patch(_ context.Context, name string, pt types.PatchType, data []byte, _ metav1.PatchOptions, _ ...string) (*v1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.patchErr != nil {
		return nil, s.patchErr
	}
	c := call{verb: "patch", namespace: s.ns, name: name}
	_ = json.Unmarshal(data, &c.patch)
	s.calls = append(s.calls, c)
	return &v1.Event{}, nil
}

func newTest(s *sink) (*Recorder, *time.Time) {
	scheme := runtime.NewScheme()
	_ = v1.AddToScheme(scheme)
	r := New(func(ns string) Sink { s.ns = ns; return s }, scheme, v1.EventSource{Component: "kubelet", Host: "n1"}, nil)
	now := time.Unix(1_700_000_000, 0)
	r.now = func() time.Time { return now }
	r.retry = time.Millisecond
	return r, &now
}

// drain posts what is queued, as Run would.
func drain(r *Recorder) {
	for {
		select {
		case ev := <-r.queue:
			r.post(context.Background(), ev)
		default:
			return
		}
	}
}

var pod = &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1"}}

func TestRepeatsBecomeCountIncrements(t *testing.T) {
	s := &sink{}
	r, now := newTest(s)
	r.Eventf(pod, v1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s", "app")
	drain(r)
	*now = now.Add(10 * time.Second)
	r.Eventf(pod, v1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s", "app")
	r.Eventf(pod, v1.EventTypeWarning, "BackOff", "Back-off restarting failed container %s", "app")
	r.Event(pod, v1.EventTypeNormal, "Pulled", "image present")
	drain(r)

	if len(s.calls) != 4 {
		t.Fatalf("calls %+v", s.calls)
	}
	first := s.calls[0]
	if first.verb != "create" || first.namespace != "ns" || first.ev.Count != 1 || first.ev.InvolvedObject.Kind != "Pod" ||
		first.ev.InvolvedObject.UID != "u1" || first.ev.Source.Host != "n1" || first.ev.ReportingController != "kubelet" {
		t.Fatalf("first event %+v", first)
	}
	for i, want := range []float64{2, 3} {
		c := s.calls[1+i]
		if c.verb != "patch" || c.name != first.name || c.patch["count"] != want {
			t.Errorf("repeat %d: %+v, want a patch of %s to count %v", i, c, first.name, want)
		}
	}
	if c := s.calls[3]; c.verb != "create" || c.ev.Reason != "Pulled" {
		t.Errorf("a different event %+v, want created", c)
	}
}

func TestEventsOfClusterScopedObjectsGoToDefault(t *testing.T) {
	s := &sink{}
	r, _ := newTest(s)
	r.Event(&v1.ObjectReference{Kind: "Node", Name: "n1", UID: "n1"}, v1.EventTypeNormal, "NodeReady", "ready")
	drain(r)
	if len(s.calls) != 1 || s.calls[0].namespace != metav1.NamespaceDefault {
		t.Fatalf("calls %+v", s.calls)
	}
}

func TestAnObjectIsRateLimited(t *testing.T) {
	s := &sink{}
	r, now := newTest(s)
	for i := 0; i < burst+10; i++ {
		r.Eventf(pod, v1.EventTypeWarning, "Failed", "attempt %d", i)
	}
	drain(r)
	if len(s.calls) != burst {
		t.Fatalf("%d events posted at once, want the burst of %d", len(s.calls), burst)
	}
	*now = now.Add(refillEvery)
	r.Eventf(pod, v1.EventTypeWarning, "Failed", "later")
	r.Eventf(pod, v1.EventTypeWarning, "Failed", "later still")
	drain(r)
	if len(s.calls) != burst+1 {
		t.Fatalf("%d events after one refill period, want %d", len(s.calls), burst+1)
	}
	other := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", UID: "u2"}}
	r.Event(other, v1.EventTypeNormal, "Started", "started")
	drain(r)
	if len(s.calls) != burst+2 {
		t.Fatal("another object's event was held back by the first one's limit")
	}
}

func TestFailuresAreRetriedAndExpiredEventsRecreated(t *testing.T) {
	s := &sink{failFirst: 2}
	r, now := newTest(s)
	r.Event(pod, v1.EventTypeNormal, "Killing", "stopping")
	drain(r)
	if len(s.calls) != 1 {
		t.Fatalf("calls %+v after two failures", s.calls)
	}
	s.patchErr = apierrors.NewNotFound(v1.Resource("events"), s.calls[0].name)
	*now = now.Add(time.Hour)
	r.Event(pod, v1.EventTypeNormal, "Killing", "stopping")
	drain(r)
	if len(s.calls) != 2 || s.calls[1].verb != "create" || s.calls[1].ev.Count != 1 || s.calls[1].name == s.calls[0].name {
		t.Fatalf("an expired event: %+v, want created afresh under a new name", s.calls)
	}
}

func TestAFullQueueDropsInsteadOfBlocking(t *testing.T) {
	r, _ := newTest(&sink{})
	done := make(chan struct{})
	go func() {
		for i := 0; i < queueLen+5; i++ {
			r.Event(pod, v1.EventTypeNormal, "X", "x")
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("recording blocked on a full queue")
	}
}
