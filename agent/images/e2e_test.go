package images

import (
	"context"
	"crypto/rand"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/test/harness/crirt"
)

// TestPullPolicyAndImageGCOnRealRuntime runs nodelet's runtime with its root on a small loop-mounted
// filesystem, pulls three 20 MiB images through the manager, and lets the collector free space.
func TestPullPolicyAndImageGCOnRealRuntime(t *testing.T) {
	mnt := loopFS(t, 768) // the runtime keeps 512 MiB free on its image filesystem
	rt := crirt.Start(t, filepath.Join(mnt, "rt"))
	var names []string
	for _, n := range []string{"a", "b", "c"} {
		extra := make([]byte, 20<<20)
		rand.Read(extra)
		names = append(names, rt.Push(t, "big-"+n+":1", extra))
	}
	ctx := context.Background()
	gc := &ImageGC{Images: rt.IS, Containers: rt.RS}
	rec := record.NewFakeRecorder(100)
	m := NewManager(rt.IS, Options{Recorder: rec, Used: gc.MarkUsed})

	ids := map[string]string{}
	for _, n := range names {
		if _, err := m.EnsureImageExists(ctx, pod, &v1.Container{Name: "c", Image: n}, nil); err != nil {
			t.Fatal(err)
		}
		st, err := rt.IS.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: n}})
		if err != nil || st.Image == nil {
			t.Fatalf("status of %s: %v", n, err)
		}
		ids[n] = st.Image.Id
	}
	events := drain(rec)
	pulled := 0
	for _, e := range events {
		if strings.Contains(e, "Successfully pulled image") && strings.Contains(e, "Image size: ") {
			pulled++
		}
	}
	if pulled != 3 {
		t.Fatalf("events %q", events)
	}
	// IfNotPresent (a tagged image's default) does not pull again; Never fails for an absent image;
	// Always pulls a present one.
	if _, err := m.EnsureImageExists(ctx, pod, &v1.Container{Image: names[0]}, nil); err != nil {
		t.Fatal(err)
	}
	if ev := drain(rec); len(ev) != 1 || !strings.Contains(ev[0], "already present") {
		t.Fatalf("IfNotPresent events %q", ev)
	}
	if _, err := m.EnsureImageExists(ctx, pod, &v1.Container{Image: crirt.Mirrored + "/absent:1", ImagePullPolicy: v1.PullNever}, nil); !errors.Is(err, kubecontainer.ErrImageNeverPull) {
		t.Fatalf("Never: %v", err)
	}
	drain(rec)
	if _, err := m.EnsureImageExists(ctx, pod, &v1.Container{Image: names[2], ImagePullPolicy: v1.PullAlways}, nil); err != nil {
		t.Fatal(err)
	}
	if ev := drain(rec); len(ev) != 2 || !strings.Contains(ev[0], "Pulling") {
		t.Fatalf("Always events %q", ev)
	}
	// A container uses c; a was used least recently (its IfNotPresent check above made it newer
	// than b, so b goes first).
	p := rt.RunPod(t, "gc", "uid-img", t.TempDir())
	rt.Start(t, p, "app", 0, names[2], []string{"sleep", "3600"})

	capacity, avail, _, err := gc.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	usage := int(100 - avail*100/capacity)
	st, _ := rt.IS.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: names[1]}})
	onePercent := int(st.Image.Size * 100 / capacity)
	t.Logf("image fs %d MiB, %d%% used, an image is %d bytes (%d%%)", capacity>>20, usage, st.Image.Size, onePercent)
	if onePercent < 2 {
		t.Fatalf("image too small for the filesystem: %d%%", onePercent)
	}
	// High just below the usage; low asks for about half an image: exactly one goes.
	gc.Policy = GCPolicy{HighThresholdPercent: usage - 1, LowThresholdPercent: usage - onePercent/2}
	res, err := gc.GarbageCollect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Removed, []string{ids[names[1]]}) {
		t.Fatalf("removed %v, want b %s", res.Removed, ids[names[1]])
	}
	_, avail2, _, _ := gc.Usage(ctx)
	t.Logf("freed %d bytes by its count, %d bytes on the filesystem", res.Freed, avail2-avail)
	if avail2 <= avail {
		t.Fatalf("no space freed on the filesystem: %d → %d", avail, avail2)
	}
	// Everything removable: a goes, c stays in use, and the collector says it could not reach the mark.
	gc.Policy = GCPolicy{HighThresholdPercent: 1, LowThresholdPercent: 0}
	res, err = gc.GarbageCollect(ctx)
	if !errors.Is(err, ErrNotEnoughFreed) || !slices.Equal(res.Removed, []string{ids[names[0]]}) {
		t.Fatalf("second collection: removed %v, %v", res.Removed, err)
	}
	if st, err := rt.IS.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: names[2]}}); err != nil || st.Image == nil {
		t.Fatalf("image in use removed: %v", err)
	}
}
