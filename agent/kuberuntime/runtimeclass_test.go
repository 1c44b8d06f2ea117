package kuberuntime

import (
	"context"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/nodelet/nodelet/test/harness/kubefake"
)

// The sandbox runs with the handler the pod's RuntimeClass names, which the agent passes on without
// judging (the runtime refuses one it lacks); a RuntimeClass the apiserver does not have fails the
// sandbox with the kubelet's event, and nothing is run.
func TestSandboxRuntimeHandler(t *testing.T) {
	client := kubefake.New(&nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata"}, Handler: "kata-qemu"})
	api := NewAPIRuntimeClasses(client)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go api.Run(ctx)
	for _, tc := range []struct {
		name        string
		classes     RuntimeClasses
		class       string
		wantHandler string // "" with wantEvent: no sandbox
		wantEvent   string
	}{
		{name: "no runtimeClassName: the default handler", classes: api, wantHandler: "default"},
		{name: "no resolver: the name is the handler", class: "runsc", wantHandler: "runsc"},
		{name: "the apiserver's RuntimeClass", classes: api, class: "kata", wantHandler: "kata-qemu"},
		{name: "a RuntimeClass the apiserver lacks", classes: api, class: "gvisor",
			wantEvent: `Warning FailedCreatePodSandBox Failed to create pod sandbox: runtimeclass.node.k8s.io "gvisor" not found`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			rec := record.NewFakeRecorder(100)
			d := f.m.Deps
			d.Recorder, d.RuntimeClasses, d.RuntimeHandler = rec, tc.classes, "default"
			f.m = NewManager(d)
			f.cri.AddImage("busybox")
			pod := testPod(v1.RestartPolicyAlways, nil, "a")
			if tc.class != "" {
				pod.Spec.RuntimeClassName = &tc.class
			}
			err := f.sync(pod)
			if tc.wantEvent != "" {
				if err == nil || len(f.cri.Sandboxes()) != 0 {
					t.Fatalf("sync: %v, sandboxes %d; want a failed sandbox creation", err, len(f.cri.Sandboxes()))
				}
				var events []string
				for len(rec.Events) > 0 {
					events = append(events, <-rec.Events)
				}
				if !slices.Contains(events, tc.wantEvent) {
					t.Fatalf("events %q, want %q", events, tc.wantEvent)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			handlers := f.cri.CallsWithPrefix("handler ")
			want := []string{"handler " + tc.wantHandler}
			if tc.wantHandler == "" || !slices.Equal(handlers, want) {
				t.Fatalf("sandbox handlers %q, want %q", handlers, want)
			}
		})
	}
	// Every lookup was served from the watch: no GET of a RuntimeClass.
	for _, a := range client.Interface.(interface{ Actions() []k8stesting.Action }).Actions() {
		if a.GetVerb() == "get" {
			t.Errorf("a lookup asked the apiserver: %v", a)
		}
	}
}
