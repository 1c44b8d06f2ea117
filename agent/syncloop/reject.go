package syncloop

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// EventRecorder records events (recorder.Interface).
type EventRecorder interface {
	Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any)
}

// reject fails a pod admission refused, with the kubelet's wording, and records the refusal as an
// event as the kubelet does (standalone: a log line, which outlives the status of a pod in no list).
func (l *SyncLoop) reject(pod *v1.Pod, reason, message string) {
	if l.Recorder != nil {
		l.Recorder.Eventf(pod, v1.EventTypeWarning, reason, "%s", message)
	}
	if l.Statuses != nil {
		l.Statuses.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodFailed, Reason: reason, Message: "Pod was rejected: " + message,
			StartTime: &metav1.Time{Time: time.Now()}})
	}
}
