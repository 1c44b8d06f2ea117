package syncloop

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodelet/nodelet/agent/admission"
	"github.com/nodelet/nodelet/agent/podsource"
)

func TestRejectCarriesTheAdmitReason(t *testing.T) {
	cases := []struct {
		name            string
		err             error
		reason, message string
	}{
		{"reasoned", &admission.Error{Reason: "SysctlForbidden", Message: `forbidden sysctl: "kernel.msgmax" not allowlisted`},
			"SysctlForbidden", `forbidden sysctl: "kernel.msgmax" not allowlisted`},
		{"plain", errors.New("node has reached its pod limit of 1"), "OutOfpods", "node has reached its pod limit of 1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := &fakeWorkers{}
			ready := true
			l, updates, _ := newLoop(w, fakeRuntime{}, &ready)
			rec, statuses := &eventRecorder{}, &statusRecorder{fakeStatuses: fakeStatuses{}}
			l.Admit = func(*v1.Pod, []*v1.Pod) error { return c.err }
			l.Recorder, l.Statuses = rec, statuses
			updates <- podsource.PodUpdate{Op: podsource.ADD, Pods: []*v1.Pod{pod("a")}}
			never := make(chan time.Time)
			l.iteration(context.Background(), never, never)
			if rec.reason != c.reason || rec.message != c.message || rec.eventtype != v1.EventTypeWarning {
				t.Fatalf("event %s %q %q, want Warning %q %q", rec.eventtype, rec.reason, rec.message, c.reason, c.message)
			}
			if s := statuses.set; s.Phase != v1.PodFailed || s.Reason != c.reason || s.Message != "Pod was rejected: "+c.message || s.StartTime == nil {
				t.Fatalf("status %+v, want Failed %q \"Pod was rejected: %s\"", s, c.reason, c.message)
			}
			if len(w.take()) != 0 {
				t.Fatal("a rejected pod was sent to a worker")
			}
		})
	}
}

type eventRecorder struct{ eventtype, reason, message string }

func (r *eventRecorder) Eventf(_ runtime.Object, eventtype, reason, format string, args ...any) {
	r.eventtype, r.reason, r.message = eventtype, reason, fmt.Sprintf(format, args...)
}

type statusRecorder struct {
	fakeStatuses
	set v1.PodStatus
}

func (s *statusRecorder) SetPodStatus(_ *v1.Pod, st v1.PodStatus) bool { s.set = st; return true }

// A pod already terminal when it is added (rejected before an agent restart) is not admitted
// again, as the kubelet skips it: no second rejection event, and its worker cleans up.
func TestTerminalPodIsNotAdmittedAgain(t *testing.T) {
	w := &fakeWorkers{}
	ready := true
	l, updates, _ := newLoop(w, fakeRuntime{}, &ready)
	rec := &eventRecorder{}
	admitted := 0
	l.Admit = func(*v1.Pod, []*v1.Pod) error { admitted++; return errors.New("no room") }
	l.Recorder = rec
	p := pod("a")
	p.Status.Phase = v1.PodFailed
	updates <- podsource.PodUpdate{Op: podsource.ADD, Pods: []*v1.Pod{p}}
	never := make(chan time.Time)
	l.iteration(context.Background(), never, never)
	if admitted != 0 || rec.reason != "" {
		t.Fatalf("a Failed pod went through admission (%d times, event %q)", admitted, rec.reason)
	}
	if len(w.take()) != 1 {
		t.Fatal("the Failed pod was not handed to its worker to clean up after it")
	}
}
