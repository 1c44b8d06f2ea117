package csi

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/test/harness/csidriver"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

func failurePV(driver string) *v1.PersistentVolume {
	return &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: v1.PersistentVolumeSpec{
		AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: driver, VolumeHandle: "vol-1", FSType: "ext4"}}}}
}

func failurePod(uid string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid)}}
}

func noAttach() *storagev1.CSIDriver {
	no := false
	return &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: testDriver}, Spec: storagev1.CSIDriverSpec{AttachRequired: &no}}
}

// The driver dies with a volume published and comes back: while it is gone nothing is set up
// and the pod's teardown waits, its mounts in place; back (a new process, knowing only what the
// system shows), a second pod publishes the volume still staged (no second stage) and the two
// teardowns release it all.
func TestDriverGoneAndBack(t *testing.T) {
	f := newFixture(t, noAttach())
	m := f.manager(t, nil)
	ctx := context.Background()
	pv := failurePV(f.d.Name)
	vol := Volume{Name: "data", PV: pv, Source: pv.Spec.CSI}
	pubA, err := m.SetUp(ctx, failurePod("a"), vol)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pubA.Path, "note"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}

	f.d.Crash()
	m.DeRegisterPlugin(f.d.Name, f.d.Endpoint)
	if _, err := m.SetUp(ctx, failurePod("b"), vol); err == nil || !strings.Contains(err.Error(), "not found in the list of registered CSI drivers") {
		t.Fatalf("set up without the driver: %v", err)
	}
	if err := m.TearDown(ctx, "a"); err == nil {
		t.Fatal("the pod was torn down without its driver")
	}
	if !slices.Contains(testutil.MountsUnder(f.root), pubA.Path) {
		t.Fatalf("the publish went without its driver: %v", testutil.MountsUnder(f.root))
	}

	d := csidriver.Start(t, f.dir, "", testDriver)
	if err := m.RegisterPlugin(d.Name, d.Endpoint, []string{"1.0.0"}); err != nil {
		t.Fatal(err)
	}
	pubB, err := m.SetUp(ctx, failurePod("b"), vol)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(pubB.Path, "note")); err != nil || string(b) != "kept" {
		t.Fatalf("the second pod reads %q %v", b, err)
	}
	for _, uid := range []types.UID{"a", "b"} {
		if err := m.TearDown(ctx, uid); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"publish vol-1 ro=false ctx=", "unpublish vol-1", "unpublish vol-1", "unstage vol-1"}
	if got := d.Calls(); !slices.Equal(got, want) {
		t.Errorf("the driver back took %q, want %q", got, want)
	}
	if left := testutil.MountsUnder(f.root); len(left) != 0 {
		t.Errorf("mounts left: %v", left)
	}
}

// The pod goes while its volume is staging: the set up is cancelled, but the driver carries on
// with the stage. The pod's teardown is refused while the driver holds the volume (Aborted, as
// the spec has it) and, once the stage is done, unstages what nobody publishes.
func TestPodGoneWhileStaging(t *testing.T) {
	f := newFixture(t, noAttach())
	arrived, release, finished := make(chan struct{}), make(chan struct{}), make(chan struct{})
	f.d.StageHook = func(done bool) {
		if done {
			close(finished)
			return
		}
		close(arrived)
		<-release
	}
	m := f.manager(t, nil)
	pv := failurePV(f.d.Name)
	ctx, cancel := context.WithCancel(context.Background())
	errC := make(chan error, 1)
	go func() {
		_, err := m.SetUp(ctx, failurePod("a"), Volume{Name: "data", PV: pv, Source: pv.Spec.CSI})
		errC <- err
	}()
	<-arrived
	cancel() // the pod is deleted
	if err := <-errC; err == nil {
		t.Fatal("a cancelled set up succeeded")
	}
	err := m.TearDown(context.Background(), "a")
	if err == nil || !strings.Contains(err.Error(), "Aborted") {
		t.Fatalf("teardown while the driver stages: %v", err)
	}
	close(release)
	<-finished
	if len(testutil.MountsUnder(f.root)) != 1 {
		t.Fatalf("the stage the driver finished: %v", testutil.MountsUnder(f.root))
	}
	if err := m.TearDown(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if got, want := f.d.Calls(), []string{"stage vol-1", "unpublish vol-1", "unstage vol-1"}; !slices.Equal(got, want) {
		t.Errorf("driver calls %q, want %q", got, want)
	}
	if left := testutil.MountsUnder(f.root); len(left) != 0 {
		t.Errorf("mounts left: %v", left)
	}
	if ents, err := os.ReadDir(filepath.Join(f.root, "plugins", PluginName, f.d.Name)); err != nil || len(ents) != 0 {
		t.Errorf("the volume's global folder stays: %v %v", ents, err)
	}
}
