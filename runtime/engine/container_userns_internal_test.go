package engine

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

// TestSweepIdmappedMounts: clones a crash left attached (a directory and a file mount) are
// detached at start and their mount points removed, and the volumes they showed keep every file:
// nothing is removed through a mount.
func TestSweepIdmappedMounts(t *testing.T) {
	state, vol := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(vol, "keep"), []byte("k"), 0o644)
	dir := filepath.Join(state, "idmapped-mounts", "0123abcd")
	os.MkdirAll(filepath.Join(dir, "0"), 0o700)
	os.WriteFile(filepath.Join(dir, "1"), nil, 0o600)
	for target, src := range map[string]string{filepath.Join(dir, "0"): vol, filepath.Join(dir, "1"): filepath.Join(vol, "keep")} {
		if err := unix.Mount(src, target, "", unix.MS_BIND, ""); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { testutil.UnmountUnder(state) })
	s := &Engine{cfg: Config{State: state}}
	if err := s.sweepIdmappedMounts(); err != nil {
		t.Fatal(err)
	}
	if m := testutil.MountsUnder(state); len(m) > 0 {
		t.Fatalf("left attached: %v", m)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("mount points left: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(vol, "keep")); err != nil || string(b) != "k" {
		t.Fatalf("the volume lost its file: %q %v", b, err)
	}
}
