package syncloop

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/admission"
	"github.com/nodelet/nodelet/agent/config"
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
			var reason, message string
			l.Admit = func(*v1.Pod, []*v1.Pod) error { return c.err }
			l.Reject = func(_ *v1.Pod, r, m string) { reason, message = r, m }
			updates <- config.PodUpdate{Op: config.ADD, Pods: []*v1.Pod{pod("a")}}
			never := make(chan time.Time)
			l.iteration(context.Background(), never, never)
			if reason != c.reason || message != c.message {
				t.Fatalf("rejected with %q %q, want %q %q", reason, message, c.reason, c.message)
			}
			if len(w.take()) != 0 {
				t.Fatal("a rejected pod was sent to a worker")
			}
		})
	}
}
