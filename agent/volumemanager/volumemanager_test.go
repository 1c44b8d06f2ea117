package volumemanager

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

func testPod(uid string, vols ...v1.Volume) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: types.UID(uid)},
		Spec: v1.PodSpec{Volumes: vols}}
}

func hostPathType(t v1.HostPathType) *v1.HostPathType { return &t }

func TestCheckHostPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	sock := filepath.Join(dir, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cases := []struct {
		name    string
		path    string
		typ     v1.HostPathType
		wantErr bool
	}{
		{"unset checks nothing", filepath.Join(dir, "missing"), v1.HostPathUnset, false},
		{"directory exists", dir, v1.HostPathDirectory, false},
		{"directory is a file", file, v1.HostPathDirectory, true},
		{"directory missing", filepath.Join(dir, "nope"), v1.HostPathDirectory, true},
		{"directoryOrCreate creates", filepath.Join(dir, "new/sub"), v1.HostPathDirectoryOrCreate, false},
		{"directoryOrCreate on a file", file, v1.HostPathDirectoryOrCreate, true},
		{"file exists", file, v1.HostPathFile, false},
		{"file is a dir", dir, v1.HostPathFile, true},
		{"fileOrCreate creates", filepath.Join(dir, "newdir/newfile"), v1.HostPathFileOrCreate, false},
		{"fileOrCreate on a dir", dir, v1.HostPathFileOrCreate, true},
		{"socket", sock, v1.HostPathSocket, false},
		{"socket is a file", file, v1.HostPathSocket, true},
		{"char device", "/dev/null", v1.HostPathCharDev, false},
		{"char device is a file", file, v1.HostPathCharDev, true},
		{"block device is a char device", "/dev/null", v1.HostPathBlockDev, true},
		{"unknown type", dir, v1.HostPathType("Bogus"), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := CheckHostPath(&v1.HostPathVolumeSource{Path: c.path, Type: hostPathType(c.typ)})
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, want error %v", err, c.wantErr)
			}
			if err != nil && !errors.Is(err, ErrHostPathType) {
				t.Fatalf("err %v is not ErrHostPathType", err)
			}
		})
	}
	if st, err := os.Stat(filepath.Join(dir, "newdir/newfile")); err != nil || !st.Mode().IsRegular() {
		t.Fatalf("FileOrCreate made %v, %v", st, err)
	}
}

func TestWriteAtomic(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	changed, err := WriteAtomic(dir, map[string]File{"a": {Data: []byte("1")}, "sub/b": {Data: []byte("2"), Mode: 0o400}}, nil)
	if err != nil || !changed {
		t.Fatal(changed, err)
	}
	read := func(p string) string { b, _ := os.ReadFile(filepath.Join(dir, p)); return string(b) }
	if read("a") != "1" || read("sub/b") != "2" {
		t.Fatalf("content %q %q", read("a"), read("sub/b"))
	}
	if l, _ := os.Readlink(filepath.Join(dir, "a")); l != "..data/a" {
		t.Fatalf("a links to %q", l)
	}
	if st, _ := os.Stat(filepath.Join(dir, "sub/b")); st.Mode().Perm() != 0o400 {
		t.Fatalf("mode %v", st.Mode())
	}
	gen1, _ := os.Readlink(filepath.Join(dir, "..data"))

	if changed, err := WriteAtomic(dir, map[string]File{"a": {Data: []byte("1")}, "sub/b": {Data: []byte("2"), Mode: 0o400}}, nil); err != nil || changed {
		t.Fatalf("unchanged content rewritten: %v %v", changed, err)
	}

	// An update swaps the generation: a removed key's link goes, the old generation too.
	if changed, err := WriteAtomic(dir, map[string]File{"a": {Data: []byte("new")}}, nil); err != nil || !changed {
		t.Fatal(changed, err)
	}
	gen2, _ := os.Readlink(filepath.Join(dir, "..data"))
	if gen1 == gen2 || read("a") != "new" {
		t.Fatalf("generation %s → %s, a = %q", gen1, gen2, read("a"))
	}
	if _, err := os.Lstat(filepath.Join(dir, "sub")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale top-level link kept: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, gen1)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("old generation kept: %v", err)
	}
	for _, bad := range []string{"../x", "/etc/x", "..data/x", "a/../../x"} {
		if _, err := WriteAtomic(dir, map[string]File{bad: {}}, nil); !errors.Is(err, ErrBadSubPath) {
			t.Errorf("key %q: err %v", bad, err)
		}
	}
}

// TestSubPathSymlinkEscape is CVE-2017-1002101 and CVE-2021-25741: a container plants a symlink in
// its volume that points at the host, and a later container mounts it through subPath.
func TestSubPathSymlinkEscape(t *testing.T) {
	testutil.Require(t)
	root := t.TempDir()
	m := &Manager{RootDir: root}
	host := t.TempDir() // stands for the host's "/"
	os.WriteFile(filepath.Join(host, "shadow"), []byte("secret"), 0o600)
	pod := testPod("uid-sub", v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	if err := m.SetUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.TearDown(pod.UID) })
	vol := emptyDir(t, m, pod, "data")
	os.Symlink(host, filepath.Join(vol, "escape"))
	os.Symlink("/", filepath.Join(vol, "root"))
	os.Symlink("../../../../../../../../..", filepath.Join(vol, "dots"))
	os.MkdirAll(filepath.Join(vol, "inner/real"), 0o755)
	os.WriteFile(filepath.Join(vol, "inner/real/f"), []byte("ok"), 0o644)
	os.Symlink("inner/real", filepath.Join(vol, "inside"))

	for i, sub := range []string{"escape", "escape/shadow", "root", "root/etc", "dots", "dots/etc/passwd", "../x", "/etc"} {
		if p, err := m.SubPath(pod, "c", i, "data", vol, sub); !errors.Is(err, ErrBadSubPath) {
			t.Errorf("subPath %q: got %q, %v; want ErrBadSubPath", sub, p, err)
		}
	}
	// A symlink that stays inside the volume is followed, as upstream.
	p, err := m.SubPath(pod, "c", 10, "data", vol, "inside")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(p, "f")); err != nil || string(b) != "ok" {
		t.Fatalf("read through subPath: %q %v", b, err)
	}
	// The mount holds the opened folder: swapping the link for an escaping one afterwards changes nothing.
	os.Remove(filepath.Join(vol, "inside"))
	os.Symlink(host, filepath.Join(vol, "inside"))
	if _, err := os.Stat(filepath.Join(p, "shadow")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("subPath mount follows the swapped link: %v", err)
	}
	// The next container start checks the subPath anew, as the kubelet does, and refuses it now.
	if p2, err := m.SubPath(pod, "c", 10, "data", vol, "inside"); !errors.Is(err, ErrBadSubPath) {
		t.Fatalf("again after the swap: got %q, %v; want ErrBadSubPath", p2, err)
	}
	// Idempotent while it names the same folder, and a missing subPath is made as a folder.
	os.Remove(filepath.Join(vol, "inside"))
	os.Symlink("inner/real", filepath.Join(vol, "inside"))
	if p2, err := m.SubPath(pod, "c", 10, "data", vol, "inside"); err != nil || p2 != p {
		t.Fatalf("again: %q %v", p2, err)
	}
	if mps := testutil.MountsUnder(p); len(mps) != 1 {
		t.Fatalf("mounts at %s: %v", p, mps)
	}
	p3, err := m.SubPath(pod, "c", 11, "data", vol, "made/here")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(p3, "x"), []byte("y"), 0o644)
	if b, _ := os.ReadFile(filepath.Join(vol, "made/here/x")); string(b) != "y" {
		t.Fatalf("write through subPath not in the volume: %q", b)
	}
	// A file subPath becomes a file mount point.
	p4, err := m.SubPath(pod, "c", 12, "data", vol, "inner/real/f")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p4); string(b) != "ok" {
		t.Fatalf("file subPath reads %q", b)
	}

	if err := m.TearDown(pod.UID); err != nil {
		t.Fatal(err)
	}
	if mps := testutil.MountsUnder(root); len(mps) > 0 {
		t.Fatalf("mounts left: %v", mps)
	}
	if b, err := os.ReadFile(filepath.Join(host, "shadow")); err != nil || string(b) != "secret" {
		t.Fatalf("host file harmed: %q %v", b, err)
	}
}

func TestEmptyDirMemoryAndTearDown(t *testing.T) {
	testutil.Require(t)
	root := t.TempDir()
	m := &Manager{RootDir: root}
	limit := resource.MustParse("1Mi")
	pod := testPod("uid-mem",
		v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: &limit}}},
		v1.Volume{Name: "disk", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: filepath.Join(root, "hostdir"), Type: hostPathType(v1.HostPathDirectoryOrCreate)}}})
	t.Cleanup(func() { m.TearDown(pod.UID) })
	for range 2 { // idempotent: one tmpfs, not two
		if err := m.SetUp(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	mem := emptyDir(t, m, pod, "mem")
	if mps := testutil.MountsUnder(mem); len(mps) != 1 {
		t.Fatalf("mounts at %s: %v", mem, mps)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(mem, &st); err != nil || st.Type != unix.TMPFS_MAGIC || uint64(st.Blocks)*uint64(st.Bsize) != 1<<20 {
		t.Fatalf("statfs %+v %v", st, err)
	}
	if err := os.WriteFile(filepath.Join(mem, "big"), make([]byte, 2<<20), 0o644); !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("writing past sizeLimit: %v", err)
	}
	if fi, _ := os.Stat(emptyDir(t, m, pod, "disk")); fi == nil || fi.Mode().Perm() != 0o777 {
		t.Fatalf("disk emptyDir %v", fi)
	}
	// A subPath bind inside, then teardown removes all and leaves the hostPath folder alone.
	hostFile := filepath.Join(root, "hostdir", "keep")
	os.WriteFile(hostFile, []byte("k"), 0o644)
	if _, err := m.SubPath(pod, "c", 0, "host", filepath.Join(root, "hostdir"), "."); err != nil {
		t.Fatal(err)
	}
	if _, err := m.SubPath(pod, "c", 1, "mem", mem, "sub"); err != nil {
		t.Fatal(err)
	}
	if err := m.TearDown(pod.UID); err != nil {
		t.Fatal(err)
	}
	if mps := testutil.MountsUnder(root); len(mps) > 0 {
		t.Fatalf("mounts left: %v", mps)
	}
	if _, err := os.Stat(podDir(t, m, pod)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pod dir kept: %v", err)
	}
	if b, _ := os.ReadFile(hostFile); string(b) != "k" {
		t.Fatal("hostPath content removed by teardown")
	}
}

func TestCleanupOrphans(t *testing.T) {
	testutil.Require(t)
	root := t.TempDir()
	m := &Manager{RootDir: root}
	limit := resource.MustParse("1Mi")
	for _, uid := range []string{"live", "gone", "gone-mem"} {
		vols := []v1.Volume{{Name: "d", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
		if strings.HasSuffix(uid, "mem") {
			vols[0].EmptyDir = &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: &limit}
		}
		pod := testPod(uid, vols...)
		if err := m.SetUp(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.TearDown(pod.UID) })
	}
	removed, err := m.CleanupOrphans(func(uid types.UID) bool { return uid == "live" })
	if err != nil || len(removed) != 2 {
		t.Fatalf("removed %v, %v", removed, err)
	}
	entries, _ := os.ReadDir(filepath.Join(root, "pods"))
	if len(entries) != 1 || entries[0].Name() != "live" {
		t.Fatalf("left %v", entries)
	}
	if mps := testutil.MountsUnder(root); len(mps) > 0 {
		t.Fatalf("mounts left: %v", mps)
	}
}

// stuckMounter never unmounts: teardown must then refuse to delete (a bind of a host folder would lose its files).
type stuckMounter struct{ kernelMounter }

func (stuckMounter) Unmount(string) error { return nil }

func TestTearDownRefusesWhileMounted(t *testing.T) {
	testutil.Require(t)
	root := t.TempDir()
	m := &Manager{RootDir: root}
	host := t.TempDir()
	os.WriteFile(filepath.Join(host, "precious"), []byte("p"), 0o644)
	pod := testPod("uid-stuck", v1.Volume{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host}}})
	os.Mkdir(filepath.Join(host, "d"), 0o755)
	os.WriteFile(filepath.Join(host, "d", "precious"), []byte("p"), 0o644)
	if _, err := m.SubPath(pod, "c", 0, "h", host, "d"); err != nil {
		t.Fatal(err)
	}
	stuck := &Manager{RootDir: root, Mounter: stuckMounter{}}
	if err := stuck.TearDown(pod.UID); !errors.Is(err, ErrMounted) {
		t.Fatalf("teardown with a mount left: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(host, "d", "precious")); string(b) != "p" {
		t.Fatal("host file deleted through a mount")
	}
	if err := m.TearDown(pod.UID); err != nil {
		t.Fatal(err)
	}
}

func TestPrepareFailureIsAnEvent(t *testing.T) {
	rec := record.NewFakeRecorder(10)
	m := &Manager{RootDir: t.TempDir(), Recorder: rec}
	pod := testPod("uid-ev", v1.Volume{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{
		Path: filepath.Join(t.TempDir(), "missing"), Type: hostPathType(v1.HostPathDirectory)}}})
	if err := m.Prepare(context.Background(), pod); !errors.Is(err, ErrHostPathType) {
		t.Fatalf("prepare: %v", err)
	}
	if e := <-rec.Events; !strings.HasPrefix(e, "Warning FailedMount") || !strings.Contains(e, `volume "h"`) {
		t.Fatalf("event %q", e)
	}
}

// BenchmarkWriteAtomic measures publishing a 10-key config map update (a new ..data generation).
func BenchmarkWriteAtomic(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "vol")
	files := map[string]File{}
	for i := range 10 {
		files[string(rune('a'+i))] = File{Data: make([]byte, 1024)}
	}
	for i := 0; b.Loop(); i++ {
		files["a"] = File{Data: []byte{byte(i), byte(i >> 8)}}
		if _, err := WriteAtomic(dir, files, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSubPath measures one safe subPath bind mount and its teardown.
func BenchmarkSubPath(b *testing.B) {
	testutil.Require(b)
	m := &Manager{RootDir: b.TempDir()}
	vol := b.TempDir()
	os.MkdirAll(filepath.Join(vol, "a/b"), 0o755)
	for i := 0; b.Loop(); i++ {
		pod := testPod("uid-bench")
		if _, err := m.SubPath(pod, "c", 0, "v", vol, "a/b"); err != nil {
			b.Fatal(err)
		}
		if err := m.TearDown(pod.UID); err != nil {
			b.Fatal(err)
		}
	}
}

// A subPath into a config map volume goes through its ..data links, which stay inside the volume.
func TestSubPathIntoAtomicVolume(t *testing.T) {
	testutil.Require(t)
	m := &Manager{RootDir: t.TempDir()}
	pod := testPod("uid-cm")
	vol := filepath.Join(t.TempDir(), "cm")
	if _, err := WriteAtomic(vol, map[string]File{"conf/app.ini": {Data: []byte("a=1")}}, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.TearDown(pod.UID) })
	p, err := m.SubPath(pod, "c", 0, "cm", vol, "conf/app.ini")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "a=1" {
		t.Fatalf("read %q", b)
	}
	// The configMap changes: the bound file stays what the running container has, and the next
	// container start (SubPath again) binds the new file, once.
	if _, err := WriteAtomic(vol, map[string]File{"conf/app.ini": {Data: []byte("a=2")}}, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "a=1" {
		t.Fatalf("the bound file changed under the container: %q", b)
	}
	for range 2 {
		if p2, err := m.SubPath(pod, "c", 0, "cm", vol, "conf/app.ini"); err != nil || p2 != p {
			t.Fatalf("SubPath after the update: %q %v", p2, err)
		}
		if b, _ := os.ReadFile(p); string(b) != "a=2" {
			t.Fatalf("after the update the subPath reads %q, want a=2", b)
		}
	}
	if mps := testutil.MountsUnder(p); len(mps) != 1 {
		t.Fatalf("mounts at %s: %v", p, mps)
	}
}

func TestUnmountKeepsFiles(t *testing.T) {
	testutil.Require(t)
	m := &Manager{RootDir: t.TempDir()}
	limit := resource.MustParse("1Mi")
	pod := testPod("uid-fin",
		v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: &limit}}},
		v1.Volume{Name: "disk", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	if err := m.SetUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.TearDown(pod.UID) })
	os.WriteFile(filepath.Join(emptyDir(t, m, pod, "disk"), "result"), []byte("done"), 0o644)
	if err := m.Unmount(pod.UID); err != nil {
		t.Fatal(err)
	}
	if mps := testutil.MountsUnder(m.RootDir); len(mps) > 0 {
		t.Fatalf("mounts left: %v", mps)
	}
	if b, _ := os.ReadFile(filepath.Join(emptyDir(t, m, pod, "disk"), "result")); string(b) != "done" {
		t.Fatalf("disk emptyDir lost its file: %q", b)
	}
}

func emptyDir(t testing.TB, m *Manager, pod *v1.Pod, name string) string {
	t.Helper()
	p, err := m.EmptyDirPath(pod.UID, name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func podDir(t testing.TB, m *Manager, pod *v1.Pod) string {
	t.Helper()
	p, err := m.PodDir(pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// With an fsGroup every file and folder of the volume belongs to the group, files are group
// readable whatever their defaultMode, folders setgid; rewriting the same content is a no-op.
func TestWriteAtomicFSGroup(t *testing.T) {
	dir := t.TempDir()
	gid := int64(4321)
	files := map[string]File{"a": {Data: []byte("1"), Mode: 0o400}, "sub/deep/b": {Data: []byte("2")}}
	if _, err := WriteAtomic(dir, files, &gid); err != nil {
		t.Fatal(err)
	}
	check := func(rel string, wantMode os.FileMode) {
		t.Helper()
		st, err := os.Stat(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode() & (os.ModePerm | os.ModeSetgid); got != wantMode {
			t.Errorf("%s: mode %v, want %v", rel, got, wantMode)
		}
		if g := st.Sys().(*syscall.Stat_t).Gid; int64(g) != gid {
			t.Errorf("%s: group %d, want %d", rel, g, gid)
		}
	}
	check("a", 0o440)
	check("sub/deep/b", 0o644)
	check("sub", 0o755|os.ModeSetgid)
	check("sub/deep", 0o755|os.ModeSetgid)
	check(".", 0o755|os.ModeSetgid|0o050)
	if changed, err := WriteAtomic(dir, files, &gid); err != nil || changed {
		t.Fatalf("same content and group rewritten: changed %v err %v", changed, err)
	}
	other := int64(4322)
	if changed, err := WriteAtomic(dir, files, &other); err != nil || !changed {
		t.Fatalf("a new fsGroup left the files as they were: changed %v err %v", changed, err)
	}
}

// A pod that finished but stays gives back its volumes, on disk and in memory, subPath mounts
// included, and keeps the rest of its folder.
func TestTearDownVolumesOfAFinishedPod(t *testing.T) {
	testutil.Require(t)
	root := t.TempDir()
	m := &Manager{RootDir: root}
	limit := resource.MustParse("1Mi")
	pod := testPod("uid-done",
		v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: &limit}}})
	if err := m.SetUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.TearDown(pod.UID) })
	data := emptyDir(t, m, pod, "data")
	if err := os.WriteFile(filepath.Join(data, "big"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := m.SubPath(pod, "c", 0, "data", data, "sub"); err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(podDir(t, m, pod), "etc-hosts")
	if err := os.WriteFile(kept, []byte("127.0.0.1 localhost\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if mps := testutil.MountsUnder(root); len(mps) != 2 {
		t.Fatalf("mounts before: %v, want the memory emptyDir and the subPath", mps)
	}
	if err := m.TearDownVolumes(pod.UID); err != nil {
		t.Fatal(err)
	}
	if mps := testutil.MountsUnder(root); len(mps) > 0 {
		t.Errorf("mounts left: %v", mps)
	}
	for _, gone := range []string{"volumes", "volume-subpaths"} {
		if _, err := os.Stat(filepath.Join(podDir(t, m, pod), gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there: %v", gone, err)
		}
	}
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("the rest of the pod's folder went too: %v", err)
	}
	if err := m.TearDownVolumes(pod.UID); err != nil {
		t.Errorf("a second teardown: %v", err)
	}
}

// The e2e spec "nonexistent volume subPath should have the correct mode and owner using FSGroup":
// a memory emptyDir is a tmpfs whose root is 1777, as the kubelet mounts it; the fsGroup adds
// setgid and keeps the sticky bit; a missing subPath is made with the volume's whole mode.
func TestTmpfsFSGroupSubPathMode(t *testing.T) {
	testutil.Require(t)
	m := &Manager{RootDir: t.TempDir()}
	pod := testPod("uid-fsg-sub",
		v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}},
		v1.Volume{Name: "disk", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	gid := int64(123)
	pod.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &gid}
	t.Cleanup(func() { m.TearDown(pod.UID) })
	if err := m.SetUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	mem := emptyDir(t, m, pod, "mem")
	p, err := m.SubPath(pod, "c", 0, "mem", mem, "test-sub")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{mem, filepath.Join(mem, "test-sub"), p} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().String(); got != "dgtrwxrwxrwx" {
			t.Errorf("mode of %s: %s, want dgtrwxrwxrwx", path, got)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Gid != 123 || st.Uid != 0 {
			t.Errorf("owner of %s: %d:%d, want 0:123", path, st.Uid, st.Gid)
		}
	}
	// On disk the folder is 0777 and setgid under the fsGroup, never sticky, as the kubelet's.
	if fi, _ := os.Stat(emptyDir(t, m, pod, "disk")); fi == nil || fi.Mode().String() != "dgrwxrwxrwx" {
		t.Errorf("disk emptyDir: %v", fi.Mode())
	}
}
