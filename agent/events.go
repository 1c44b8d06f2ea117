package agent

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
)

// logRecorder turns events into log lines when there is no apiserver to send them to.
type logRecorder struct{ log *slog.Logger }

var _ record.EventRecorder = logRecorder{}

func (r logRecorder) Event(obj runtime.Object, eventtype, reason, message string) {
	level := slog.LevelDebug
	if eventtype == v1.EventTypeWarning {
		level = slog.LevelWarn
	}
	name := ""
	if m, err := meta.Accessor(obj); err == nil {
		name = m.GetNamespace() + "/" + m.GetName()
	}
	r.log.Log(context.Background(), level, "event", "object", name, "type", eventtype, "reason", reason, "message", message)
}

func (r logRecorder) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	r.Event(obj, eventtype, reason, fmt.Sprintf(format, args...))
}

func (r logRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, format string, args ...any) {
	r.Eventf(obj, eventtype, reason, format, args...)
}

// eventLog keeps the last events of each pod for `nodelet describe`, and passes every event on.
type eventLog struct {
	next  record.EventRecorder
	mu    sync.Mutex
	byPod map[string][]v1.Event
}

const eventsPerPod = 50

func newEventLog(next record.EventRecorder) *eventLog {
	return &eventLog{next: next, byPod: map[string][]v1.Event{}}
}

func (l *eventLog) Event(obj runtime.Object, eventtype, reason, message string) {
	l.next.Event(obj, eventtype, reason, message)
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	now := metav1.Now()
	key := m.GetNamespace() + "/" + m.GetName()
	ev := v1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: m.GetNamespace(), Name: fmt.Sprintf("%s.%x", m.GetName(), now.UnixNano())},
		InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: m.GetNamespace(), Name: m.GetName(), UID: m.GetUID()},
		Type:           eventtype, Reason: reason, Message: message, Count: 1,
		FirstTimestamp: now, LastTimestamp: now, Source: v1.EventSource{Component: "kubelet"},
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	evs := l.byPod[key]
	if n := len(evs); n > 0 && evs[n-1].Reason == reason && evs[n-1].Message == message {
		evs[n-1].Count++
		evs[n-1].LastTimestamp = now
		return
	}
	if len(evs) >= eventsPerPod {
		evs = evs[1:]
	}
	l.byPod[key] = append(evs, ev)
}

func (l *eventLog) Eventf(obj runtime.Object, eventtype, reason, format string, args ...any) {
	l.Event(obj, eventtype, reason, fmt.Sprintf(format, args...))
}

func (l *eventLog) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, format string, args ...any) {
	l.Eventf(obj, eventtype, reason, format, args...)
}

// PodEvents returns the events recorded for a pod, oldest first.
func (l *eventLog) PodEvents(namespace, name string) []v1.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]v1.Event(nil), l.byPod[namespace+"/"+name]...)
}

// Forget drops the events of pods no longer known.
func (l *eventLog) Forget(keep map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k := range l.byPod {
		if !keep[k] {
			delete(l.byPod, k)
		}
	}
}
