package containergc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/crirt"
)

// TestCollectOnRealRuntime: a live pod whose container crashed three times and a deleted pod, on
// nodelet's runtime; the collector keeps the live pod's newest attempt and removes everything else,
// logs and the deleted pod's log folder included.
func TestCollectOnRealRuntime(t *testing.T) {
	rt := crirt.Start(t, filepath.Join(t.TempDir(), "rt"))
	image := rt.Push(t, "busybox:gc", nil)
	rt.Pull(t, image)
	ctx := context.Background()
	logs := t.TempDir()

	live := rt.RunPod(t, "web", "uid-live", filepath.Join(logs, "default_web_uid-live"))
	var attempts []string
	for i := range 3 {
		id := rt.Start(t, live, "app", uint32(i), image, []string{"sh", "-c", "echo attempt; exit 1"})
		rt.WaitExited(t, id)
		attempts = append(attempts, id)
	}
	running := rt.Start(t, live, "side", 0, image, []string{"sleep", "3600"})

	gone := rt.RunPod(t, "old", "uid-gone", filepath.Join(logs, "default_old_uid-gone"))
	goneID := rt.Start(t, gone, "app", 0, image, []string{"true"})
	rt.WaitExited(t, goneID)
	if _, err := rt.RS.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: gone.ID}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := os.Stat(filepath.Join(logs, "default_web_uid-live", "app", []string{"0.log", "1.log", "2.log"}[i])); err != nil {
			t.Fatalf("attempt %d wrote no log: %v", i, err)
		}
	}

	g := &GC{Runtime: rt.RS, Pods: livePods{"uid-live": true}, Policy: DefaultPolicy, PodLogsDir: logs}
	st, err := g.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("collected %+v", st)
	cs, err := rt.RS.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]bool{}
	for _, c := range cs.Containers {
		left[c.Id] = true
	}
	if len(left) != 2 || !left[attempts[2]] || !left[running] {
		t.Fatalf("containers left %v; want the newest attempt %s and the running %s", left, attempts[2], running)
	}
	for i, want := range []bool{false, false, true} {
		_, err := os.Stat(filepath.Join(logs, "default_web_uid-live", "app", []string{"0.log", "1.log", "2.log"}[i]))
		if (err == nil) != want {
			t.Errorf("log of attempt %d: %v, want kept %v", i, err, want)
		}
	}
	sbs, err := rt.RS.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sbs.Items) != 1 || sbs.Items[0].Id != live.ID {
		t.Fatalf("sandboxes left %v; want only the live pod's", sbs.Items)
	}
	if _, err := os.Stat(filepath.Join(logs, "default_old_uid-gone")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("deleted pod's log folder: %v", err)
	}
	if st.Containers != 3 || st.Sandboxes != 1 || st.LogDirs != 1 {
		t.Fatalf("stats %+v", st)
	}
}
