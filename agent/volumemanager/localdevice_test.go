package volumemanager

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/test/harness/kubefake"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// A local PV of volumeMode Filesystem whose path is a block device is the device's filesystem,
// made when the device has none and mounted once for every pod that claims it; the last pod's
// teardown unmounts it (also that of an agent restarted in between), and the next pod finds what
// the first wrote (no second format).
func TestLocalDeviceFilesystem(t *testing.T) {
	testutil.Require(t, "losetup", "mkfs.ext4", "blkid")
	dev := testutil.LoopDevice(t, 16<<20)
	root := t.TempDir()
	t.Cleanup(func() { testutil.UnmountUnder(root) })

	client := kubefake.New(claim("disk", "pv-disk", v1.ClaimBound),
		pv("pv-disk", "uid-disk", v1.PersistentVolumeSource{Local: &v1.LocalVolumeSource{Path: dev}}))
	m := &Manager{RootDir: root, Claims: client}
	ctx := context.Background()
	pod := func(uid string) *v1.Pod {
		p := claimPod("disk", false)
		p.UID = types.UID(uid)
		return p
	}
	a, b := pod("a"), pod("b")
	for _, p := range []*v1.Pod{a, b} {
		if err := m.Prepare(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	pathA, _, _ := m.ClaimPath(a, "data")
	pathB, _, _ := m.ClaimPath(b, "data")
	want := filepath.Join(root, "plugins", "kubernetes.io", "local-volume", "mounts", "pv-disk")
	if pathA != want || pathB != want {
		t.Fatalf("claim paths %q %q, want %q", pathA, pathB, want)
	}
	if fs, _ := exec.Command("blkid", "-o", "value", "-s", "TYPE", dev).Output(); strings.TrimSpace(string(fs)) != "ext4" {
		t.Fatalf("the device holds %q, want the ext4 made for it", fs)
	}
	if err := os.WriteFile(filepath.Join(want, "note"), []byte("kept"), 0o644); err != nil {
		t.Fatal(err)
	}
	// An agent restarted knows the pods' use from their folders alone.
	m = &Manager{RootDir: root, Claims: client}
	if err := m.Unmount(a.UID); err != nil {
		t.Fatal(err)
	}
	if len(testutil.MountsUnder(want)) != 1 {
		t.Fatal("the device was unmounted while pod b claims it")
	}
	if err := m.Unmount(b.UID); err != nil {
		t.Fatal(err)
	}
	if left := testutil.MountsUnder(root); len(left) != 0 {
		t.Fatalf("mounts left after the last pod: %v", left)
	}
	if _, err := os.Stat(want); !os.IsNotExist(err) {
		t.Fatalf("the mount folder stays: %v", err)
	}
	c := pod("c")
	if err := m.Prepare(ctx, c); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(want, "note")); err != nil || string(b) != "kept" {
		t.Fatalf("the next pod reads %q %v: the device was formatted again?", b, err)
	}
	if err := m.Unmount(c.UID); err != nil {
		t.Fatal(err)
	}
	if left := testutil.MountsUnder(root); len(left) != 0 {
		t.Fatalf("mounts left: %v", left)
	}
}
