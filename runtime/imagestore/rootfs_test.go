package imagestore

import (
	"archive/tar"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// whiteoutImage has three layers: a base, one that deletes and makes a dir opaque, and one with
// hardlinks, xattrs, ownership and modes.
func whiteoutImage(t testing.TB) v1.Image {
	base := append([]entry{}, dir("a"), file("a/1", "one"), file("a/2", "two"), file("b", "bee"),
		dir("c"), file("c/x", "ex"))
	l1 := tarOf(t, base...)
	l2 := tarOf(t, file("a/.wh.1", ""), file(".wh.b", ""), dir("c"), file("c/.wh..wh..opq", ""), file("c/y", "why"))
	owned := file("owned", "mine")
	owned.uid, owned.gid, owned.mode = 1000, 1001, 0o600
	tagged := file("tagged", "x")
	tagged.xattrs = map[string]string{"user.nodelet": "yes"}
	l3 := tarOf(t, file("d", "dee"), hardlink("d2", "d"), owned, tagged,
		entry{name: "setuid", typ: tar.TypeReg, body: "s", mode: 0o4755})
	return imageOf(t, [][]byte{busyboxTar(t), l1, l2, l3}, func(c *v1.Config) {
		c.Volumes = map[string]struct{}{"/var/data": {}}
		c.User = "1000"
	})
}

func TestRootfsOverlayOfSeveralLayers(t *testing.T) {
	testutil.Require(t, "busybox", "chroot")
	sb := newSandbox(t)
	reg := newRegistry(t, false, "", "")
	full := reg.push(t, "layers/whiteouts:1", whiteoutImage(t))
	s := openStore(t, sb.store)
	img, err := s.Pull(ctxT(t), full, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rf, err := s.PrepareRootfs(ctxT(t), "ctr1", full)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.RemoveRootfs(ctxT(t), "ctr1") })
	if rf.ImageID != img.ID || rf.ImageRef != img.RepoDigests[0] || rf.Config.User != "1000" {
		t.Fatalf("rootfs %+v", rf)
	}
	m := rf.Path
	mustNotExist := []string{"a/1", "b", "c/x"}
	for _, p := range mustNotExist {
		if _, err := os.Lstat(filepath.Join(m, p)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s should be whited out: %v", p, err)
		}
	}
	mustRead := map[string]string{"a/2": "two", "c/y": "why", "d": "dee", "d2": "dee", "etc/hostname": "image\n"}
	for p, want := range mustRead {
		if b, err := os.ReadFile(filepath.Join(m, p)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
	var st1, st2 syscall.Stat_t
	syscall.Stat(filepath.Join(m, "d"), &st1)
	syscall.Stat(filepath.Join(m, "d2"), &st2)
	if st1.Ino != st2.Ino {
		t.Error("hardlink d2 is not the same inode as d")
	}
	var st syscall.Stat_t
	syscall.Stat(filepath.Join(m, "owned"), &st)
	if st.Uid != 1000 || st.Gid != 1001 || st.Mode&0o7777 != 0o600 {
		t.Errorf("owned: uid %d gid %d mode %o", st.Uid, st.Gid, st.Mode&0o7777)
	}
	syscall.Stat(filepath.Join(m, "setuid"), &st)
	if st.Mode&0o7777 != 0o4755 {
		t.Errorf("setuid mode %o", st.Mode&0o7777)
	}
	buf := make([]byte, 16)
	if n, err := unix.Getxattr(filepath.Join(m, "tagged"), "user.nodelet", buf); err != nil || string(buf[:n]) != "yes" {
		t.Errorf("xattr: %q %v", buf[:n], err)
	}
	if fi, err := os.Stat(filepath.Join(m, "var/data")); err != nil || !fi.IsDir() {
		t.Errorf("image volume dir: %v", err)
	}
	out, err := exec.Command("chroot", m, "/bin/sh", "-c", "echo hi > /newfile && /bin/busybox cat /a/2").CombinedOutput()
	if err != nil || string(out) != "two" {
		t.Fatalf("busybox in the rootfs: %q %v", out, err)
	}
	if _, err := os.Stat(filepath.Join(sb.store, "rootfs", "ctr1", "upper", "newfile")); err != nil {
		t.Errorf("write did not land in the container's upper dir: %v", err)
	}
	// Idempotent, and the image is now in use.
	again, err := s.PrepareRootfs(ctxT(t), "ctr1", full)
	if err != nil || again.Path != rf.Path {
		t.Fatalf("second prepare: %v %v", again, err)
	}
	if err := s.Remove(ctxT(t), full); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("removing an image in use: %v", err)
	}
	if _, c, _ := s.FsUsage(); c.Bytes == 0 || c.Inodes == 0 {
		t.Errorf("container usage %+v", c)
	}
	if err := s.RemoveRootfs(ctxT(t), "ctr1"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveRootfs(ctxT(t), "ctr1"); err != nil {
		t.Fatalf("second remove: %v", err)
	}
	if mounts := testutil.MountsUnder(sb.base); len(mounts) != 0 {
		t.Fatalf("mounts left: %v", mounts)
	}
	if err := s.Remove(ctxT(t), full); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Join(sb.store, "layers")); len(ents) != 0 {
		t.Fatalf("layers left: %v", ents)
	}
	sb.checkOutside(t)
}

func TestRootfsManyLayers(t *testing.T) {
	testutil.Require(t, "busybox")
	const n = 120
	tars := [][]byte{busyboxTar(t)}
	for i := range n {
		tars = append(tars, tarOf(t, file(fmt.Sprintf("f%03d", i), fmt.Sprint(i))))
	}
	sb := newSandbox(t)
	reg := newRegistry(t, false, "", "")
	full := reg.push(t, "layers/many:1", imageOf(t, tars, nil))
	s := openStore(t, sb.store)
	if _, err := s.Pull(ctxT(t), full, PullOptions{}); err != nil {
		t.Fatal(err)
	}
	rf, err := s.PrepareRootfs(ctxT(t), "many", full)
	if err != nil {
		t.Fatal(err)
	}
	defer s.RemoveRootfs(ctxT(t), "many")
	for i := range n {
		if b, err := os.ReadFile(filepath.Join(rf.Path, fmt.Sprintf("f%03d", i))); err != nil || string(b) != fmt.Sprint(i) {
			t.Fatalf("layer %d: %q %v", i, b, err)
		}
	}
}

func TestPrepareRootfsErrors(t *testing.T) {
	s := openStore(t, t.TempDir())
	if _, err := s.PrepareRootfs(ctxT(t), "../evil", "busybox"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("bad container ID: %v", err)
	}
	if _, err := s.PrepareRootfs(ctxT(t), "c1", "nosuchimage"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("missing image: %v", err)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "rootfs", "c1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("failed prepare left its dir: %v", err)
	}
	if err := s.RemoveRootfs(ctxT(t), "never-made"); err != nil {
		t.Errorf("removing a missing rootfs: %v", err)
	}
}

// After a reboot the rootfs record is there but the mount is not: preparing again remounts it with
// the container's writes intact.
func TestPrepareRootfsRemountsAfterReboot(t *testing.T) {
	sb := newSandbox(t)
	reg := newRegistry(t, false, "", "")
	full := reg.push(t, "reboot/img:1", twoLayerImage(t, "r"))
	s := openStore(t, sb.store)
	if _, err := s.Pull(ctxT(t), full, PullOptions{}); err != nil {
		t.Fatal(err)
	}
	rf, err := s.PrepareRootfs(ctxT(t), "rb", full)
	if err != nil {
		t.Fatal(err)
	}
	defer s.RemoveRootfs(ctxT(t), "rb")
	if err := os.WriteFile(filepath.Join(rf.Path, "written"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := unix.Unmount(rf.Path, 0); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, sb.store) // a restarted daemon
	rf2, err := s.PrepareRootfs(ctxT(t), "rb", "ignored: the record names the image")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(rf2.Path, "written")); err != nil || string(b) != "kept" {
		t.Fatalf("container write lost: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(rf2.Path, "data", "msg")); err != nil || string(b) != "r" {
		t.Fatalf("image content: %q %v", b, err)
	}
}
