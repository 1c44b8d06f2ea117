package agent

import (
	"context"
	"fmt"
	"log/slog"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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
