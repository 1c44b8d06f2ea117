package podsync

import (
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Recorder records events about pods (record.EventRecorder).
type Recorder interface {
	Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...interface{})
}

// The reason and message of a pod failed for running past spec.activeDeadlineSeconds, as the
// kubelet writes them (the conformance suite checks the reason).
const (
	ReasonDeadlineExceeded  = "DeadlineExceeded"
	MessageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// ActiveDeadline is when a pod started at start must end: start + spec.activeDeadlineSeconds.
// ok is false for a pod without a deadline or not started yet.
func ActiveDeadline(pod *v1.Pod, start *metav1.Time) (deadline time.Time, ok bool) {
	if pod.Spec.ActiveDeadlineSeconds == nil || start == nil || start.IsZero() {
		return time.Time{}, false
	}
	return start.Add(time.Duration(*pod.Spec.ActiveDeadlineSeconds) * time.Second), true
}

// StartTime is when the pod became active on this node: the start the status manager keeps, else
// the one the apiserver has (the agent restarted and has not published a status yet).
func StartTime(pod *v1.Pod, kept v1.PodStatus) *metav1.Time {
	if kept.StartTime != nil {
		return kept.StartTime
	}
	return pod.Status.StartTime
}

// PastActiveDeadline reports whether the pod has been active longer than its deadline at now.
func PastActiveDeadline(pod *v1.Pod, kept v1.PodStatus, now time.Time) bool {
	d, ok := ActiveDeadline(pod, StartTime(pod, kept))
	return ok && !now.Before(d)
}

// enforceDeadline fails st, just generated from old, when the pod ran past its deadline: the
// sync then treats the pod as terminal and its containers are killed. A pod that already ended
// otherwise keeps its outcome; the event is recorded once, when the pod fails for it.
func (s *Syncer) enforceDeadline(pod *v1.Pod, old v1.PodStatus, st *v1.PodStatus, now time.Time) {
	if terminal(old.Phase) && old.Reason != ReasonDeadlineExceeded {
		return
	}
	start := StartTime(pod, old)
	if start == nil {
		start = st.StartTime
	}
	d, ok := ActiveDeadline(pod, start)
	if !ok || now.Before(d) {
		return
	}
	first := old.Reason != ReasonDeadlineExceeded
	st.Phase, st.Reason, st.Message = v1.PodFailed, ReasonDeadlineExceeded, MessageDeadlineExceeded
	if first && s.Recorder != nil {
		s.Recorder.Eventf(pod, v1.EventTypeNormal, ReasonDeadlineExceeded, MessageDeadlineExceeded)
	}
}
