package volumemanager

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

// tableCounter counts reads of the whole mount table.
type tableCounter struct {
	kernelMounter
	reads *atomic.Int32
}

func (c tableCounter) MountPoints(dir string) ([]string, error) {
	c.reads.Add(1)
	return c.kernelMounter.MountPoints(dir)
}

// TestTearDownReadsNoMountTable: a pod with a memory emptyDir, an API-style tmpfs, subPath binds
// of a hostPath and of a file, set up on every sync and torn down, never has the host's whole
// mount table read: its cost grows with every pod on the node, which made deleting many pods at
// once quadratic.
func TestTearDownReadsNoMountTable(t *testing.T) {
	testutil.Require(t)
	root := t.TempDir()
	reads := &atomic.Int32{}
	m := &Manager{RootDir: root, Mounter: tableCounter{reads: reads}}
	limit := resource.MustParse("1Mi")
	host := filepath.Join(root, "hostdir")
	pod := testPod("uid-notable",
		v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: &limit}}},
		v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host, Type: hostPathType(v1.HostPathDirectoryOrCreate)}}})
	t.Cleanup(func() { (&Manager{RootDir: root}).TearDown(pod.UID) })
	for range 2 {
		if err := m.SetUp(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(host, "keep"), []byte("k"), 0o644)
	mem := emptyDir(t, m, pod, "mem")
	os.WriteFile(filepath.Join(mem, "f"), []byte("f"), 0o644)
	for i, sub := range []struct{ vol, path, subPath string }{{"host", host, "."}, {"mem", mem, "f"}} {
		for range 2 { // a container restarted: the bind is found in place
			if _, err := m.SubPath(pod, "c", i, sub.vol, sub.path, sub.subPath); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := m.TearDown(pod.UID); err != nil {
		t.Fatal(err)
	}
	if n := reads.Load(); n != 0 {
		t.Errorf("the mount table was read %d times", n)
	}
	if mps := testutil.MountsUnder(root); len(mps) > 0 {
		t.Fatalf("mounts left: %v", mps)
	}
	if b, _ := os.ReadFile(filepath.Join(host, "keep")); string(b) != "k" {
		t.Fatal("hostPath content removed by teardown")
	}
}

// TestTearDownFindsAMountWhereNoneIsMade: a mount below a volume's folder (as a container's
// Bidirectional propagation makes one) is not where the volume manager looks; the removal refuses
// to cross it, the mount table finds it, and the teardown ends clean with the bound folder's files
// intact.
func TestTearDownFindsAMountWhereNoneIsMade(t *testing.T) {
	testutil.Require(t)
	root := t.TempDir()
	m := &Manager{RootDir: root}
	pod := testPod("uid-propagated", v1.Volume{Name: "d", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	t.Cleanup(func() { m.TearDown(pod.UID) })
	if err := m.SetUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	precious := t.TempDir()
	os.WriteFile(filepath.Join(precious, "keep"), []byte("k"), 0o644)
	deep := filepath.Join(emptyDir(t, m, pod, "d"), "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount(precious, deep, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(deep, unix.MNT_DETACH) })
	// The removal alone refuses it.
	if err := removeAll(podDir(t, m, pod)); !errors.Is(err, ErrMounted) {
		t.Fatalf("removeAll across a bind: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(precious, "keep")); string(b) != "k" {
		t.Fatal("removeAll deleted through a bind mount")
	}
	if err := m.TearDown(pod.UID); err != nil {
		t.Fatal(err)
	}
	if mps := testutil.MountsUnder(root); len(mps) > 0 {
		t.Fatalf("mounts left: %v", mps)
	}
	if b, _ := os.ReadFile(filepath.Join(precious, "keep")); string(b) != "k" {
		t.Fatal("teardown deleted through a bind mount")
	}
}

// TestRemoveAllRefusesSymlinksAndKeepsTheirTargets: a symlink below the folder is removed, never
// followed.
func TestRemoveAllRefusesSymlinksAndKeepsTheirTargets(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pod")
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "keep"), []byte("k"), 0o644)
	if err := os.MkdirAll(filepath.Join(dir, "x", "y"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Symlink(outside, filepath.Join(dir, "x", "link"))
	os.WriteFile(filepath.Join(dir, "x", "y", "f"), []byte("f"), 0o644)
	if err := removeAll(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("folder left: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "keep")); string(b) != "k" {
		t.Fatal("removeAll followed a symlink")
	}
	if err := removeAll(dir); err != nil {
		t.Fatalf("removing what is gone: %v", err)
	}
}
