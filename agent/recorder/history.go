package recorder

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodelet/nodelet/agent/kubeclient"
)

// Slog turns events into log lines when there is no apiserver to send them to.
type Slog struct{ log *slog.Logger }

// NewSlog logs events to log.
func NewSlog(log *slog.Logger) Slog { return Slog{log: log} }

func (r Slog) Event(obj runtime.Object, eventtype, reason, message string) {
	level := slog.LevelDebug
	if eventtype == v1.EventTypeWarning {
		level = slog.LevelWarn
	}
	name := ""
	if ref, ok := obj.(*v1.ObjectReference); ok {
		name = ref.Kind + "/" + ref.Name
	} else if m, err := meta.Accessor(obj); err == nil {
		name = m.GetNamespace() + "/" + m.GetName()
	}
	r.log.Log(context.Background(), level, "event", "object", name, "type", eventtype, "reason", reason, "message", message)
}

func (r Slog) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	r.Event(obj, eventtype, reason, fmt.Sprintf(format, args...))
}

func (r Slog) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, format string, args ...any) {
	r.Eventf(obj, eventtype, reason, format, args...)
}

// History keeps the last events of each pod and of the node for `nodelet describe`, and passes
// every event on: standalone there is no apiserver to ask for them, and in a cluster it answers
// without one.
type History struct {
	next  Interface
	mu    sync.Mutex
	byPod map[string][]v1.Event
	node  []v1.Event
	now   func() metav1.Time
}

const eventsPerPod = 50

// EventClient is the apiserver's events (a *kubeclient.Client is one).
type EventClient interface {
	Events(namespace string) kubeclient.EventInterface
}

// ForNode records a node agent's events as the kubelet does: kept for describe, and in a cluster
// (client set) posted by the Recorder returned, whose Run sends them, signed by the kubelet on
// node; standalone (client nil) logged to log, and no Recorder.
func ForNode(client EventClient, node string, log *slog.Logger) (*History, *Recorder) {
	if client == nil {
		return NewHistory(NewSlog(log)), nil
	}
	r := New(func(ns string) Sink { return client.Events(ns) }, kubeclient.Scheme(), v1.EventSource{Component: "kubelet", Host: node}, log)
	return NewHistory(r), r
}

// NewHistory keeps the events it passes on to next.
func NewHistory(next Interface) *History {
	return &History{next: next, byPod: map[string][]v1.Event{}, now: metav1.Now}
}

func (l *History) Event(obj runtime.Object, eventtype, reason, message string) {
	l.next.Event(obj, eventtype, reason, message)
	if ref, ok := obj.(*v1.ObjectReference); ok {
		if ref.Kind == "Node" {
			l.nodeEvent(*ref, eventtype, reason, message)
		}
		return
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	now := l.now()
	key := m.GetNamespace() + "/" + m.GetName()
	ev := v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: m.GetNamespace(), Name: fmt.Sprintf("%s.%x", m.GetName(), now.UnixNano())},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUID()},
		Type:           eventtype, Reason: reason, Message: message, Count: 1,
		FirstTimestamp: now, LastTimestamp: now, Source: v1.EventSource{Component: "kubelet"},
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byPod[key] = appendEvent(l.byPod[key], ev)
}

// nodeEvent keeps an event of the node (named by the kubelet's reference, whose UID is its name).
func (l *History) nodeEvent(ref v1.ObjectReference, eventtype, reason, message string) {
	now := l.now()
	ev := v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: fmt.Sprintf("%s.%x", ref.Name, now.UnixNano())},
		InvolvedObject: ref,
		Type:           eventtype, Reason: reason, Message: message, Count: 1,
		FirstTimestamp: now, LastTimestamp: now, Source: v1.EventSource{Component: "kubelet", Host: ref.Name},
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.node = appendEvent(l.node, ev)
}

// appendEvent adds ev to evs, counting up a repeat of the last event instead (same type, reason
// and message, as the apiserver's event series aggregate them), and keeps at most eventsPerPod.
func appendEvent(evs []v1.Event, ev v1.Event) []v1.Event {
	if n := len(evs); n > 0 && evs[n-1].Type == ev.Type && evs[n-1].Reason == ev.Reason && evs[n-1].Message == ev.Message {
		evs[n-1].Count++
		evs[n-1].LastTimestamp = ev.LastTimestamp
		return evs
	}
	if len(evs) >= eventsPerPod {
		evs = evs[1:]
	}
	return append(evs, ev)
}

func (l *History) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	l.Event(obj, eventtype, reason, fmt.Sprintf(format, args...))
}

func (l *History) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, format string, args ...any) {
	l.Eventf(obj, eventtype, reason, format, args...)
}

// PodEvents returns the events recorded for a pod, oldest first.
func (l *History) PodEvents(namespace, name string) []v1.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]v1.Event(nil), l.byPod[namespace+"/"+name]...)
}

// NodeEvents returns the events recorded about the node, oldest first.
func (l *History) NodeEvents() []v1.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]v1.Event(nil), l.node...)
}

// Forget drops the events of pods no longer known.
func (l *History) Forget(keep map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.byPod {
		if !keep[k] {
			delete(l.byPod, k)
		}
	}
}
