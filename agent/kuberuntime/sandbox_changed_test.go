package kuberuntime

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// SandboxChanged tells of a sandbox replaced, never of a new pod's first one.
func TestSandboxChangedOnlyWhenReplaced(t *testing.T) {
	f := newFixture(t)
	rec := record.NewFakeRecorder(100)
	d := f.m.Deps
	d.Recorder = rec
	f.m = NewManager(d)
	f.cri.AddImage("busybox")
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	changed := func() int {
		n := 0
		for len(rec.Events) > 0 {
			if e := <-rec.Events; strings.HasPrefix(e, "Normal SandboxChanged") {
				n++
			}
		}
		return n
	}
	f.mustSync(pod)
	if n := changed(); n != 0 {
		t.Fatalf("a new pod got %d SandboxChanged events", n)
	}
	f.mustSync(pod)
	if n := changed(); n != 0 {
		t.Fatalf("a steady pod got %d SandboxChanged events", n)
	}
	sbs := f.cri.Sandboxes()
	if len(sbs) != 1 {
		t.Fatalf("sandboxes %d", len(sbs))
	}
	f.cri.KillSandbox(sbs[0].Id)
	f.mustSync(pod)
	if n := changed(); n != 1 {
		t.Fatalf("a replaced sandbox got %d SandboxChanged events, want 1", n)
	}
}
