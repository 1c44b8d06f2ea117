package server

import (
	"fmt"
	"sync"
	"time"

	"github.com/nodelet/nodelet/agent/recorder"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// PodList adapts a "list my pods with their status" function (the Agent's Pods) to PodSource.
type PodList func() []*v1.Pod

func (f PodList) Pods() []*v1.Pod { return f() }

func (f PodList) Pod(namespace, name string) (*v1.Pod, bool) {
	for _, p := range f() {
		if p.Namespace == namespace && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// EventStore is a recorder.Interface that keeps the last events of each pod in memory, so a
// standalone agent (no apiserver to hold events) can show them in `nodelet describe`. It passes
// every event on to Next when set, so it wraps the agent's recorder without replacing it.
type EventStore struct {
	Next recorder.Interface
	// PerPod bounds the events kept per pod (default 50); repeats of the last event count up
	// instead of taking room, as the apiserver's event series do.
	PerPod int

	mu     sync.Mutex
	events map[string][]v1.Event
	now    func() time.Time
}

var (
	_ recorder.Interface = (*EventStore)(nil)
	_ EventSource        = (*EventStore)(nil)
)

func (s *EventStore) Event(obj runtime.Object, eventtype, reason, message string) {
	if s.Next != nil {
		s.Next.Event(obj, eventtype, reason, message)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	if _, isPod := obj.(*v1.Pod); !isPod {
		return
	}
	now := time.Now()
	if s.now != nil {
		now = s.now()
	}
	key := m.GetNamespace() + "/" + m.GetName()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.events == nil {
		s.events = map[string][]v1.Event{}
	}
	list := s.events[key]
	if n := len(list); n > 0 {
		last := &list[n-1]
		if last.Type == eventtype && last.Reason == reason && last.Message == message {
			last.Count++
			last.LastTimestamp = metav1.NewTime(now)
			return
		}
	}
	limit := s.PerPod
	if limit <= 0 {
		limit = 50
	}
	if len(list) >= limit {
		list = append(list[:0], list[len(list)-limit+1:]...)
	}
	list = append(list, v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", m.GetName(), now.UnixNano()), Namespace: m.GetNamespace()},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUID()},
		Type:           eventtype, Reason: reason, Message: message, Count: 1,
		FirstTimestamp: metav1.NewTime(now), LastTimestamp: metav1.NewTime(now),
		Source: v1.EventSource{Component: "nodelet"},
	})
	s.events[key] = list
}

func (s *EventStore) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	s.Event(obj, eventtype, reason, fmt.Sprintf(format, args...))
}

func (s *EventStore) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, format string, args ...any) {
	s.Eventf(obj, eventtype, reason, format, args...)
}

// PodEvents returns a pod's events, oldest first.
func (s *EventStore) PodEvents(namespace, name string) []v1.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]v1.Event(nil), s.events[namespace+"/"+name]...)
}

// Forget drops a deleted pod's events.
func (s *EventStore) Forget(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.events, namespace+"/"+name)
}
