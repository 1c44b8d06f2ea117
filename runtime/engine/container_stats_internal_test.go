package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nodelet/nodelet/internal/cgroupfs"
)

// TestStatsNetworkUsage reads this process's own namespace, which has at least one interface
// besides loopback on any machine that runs these tests.
func TestStatsNetworkUsage(t *testing.T) {
	nu := networkUsage(os.Getpid(), 1)
	if nu == nil || nu.DefaultInterface == nil || nu.DefaultInterface.Name == "" || nu.DefaultInterface.RxBytes == nil {
		t.Fatalf("network usage: %v", nu)
	}
	for _, i := range nu.Interfaces {
		if i.Name == "lo" {
			t.Fatal("loopback counted")
		}
	}
	if networkUsage(-1, 1) != nil {
		t.Fatal("usage for no process")
	}
}

func TestStatsResolveUpper(t *testing.T) {
	root := t.TempDir()
	upper := filepath.Join(root, "rootfs", "c1", "upper")
	if err := os.MkdirAll(upper, 0o755); err != nil {
		t.Fatal(err)
	}
	merged := filepath.Join(root, "rootfs", "c1", "merged")
	for _, tc := range []struct{ in, want string }{
		{"rootfs/c1/upper", upper},
		{upper, upper},
		{"nowhere/upper", merged},
	} {
		if got := resolveUpper(merged, tc.in); got != tc.want {
			t.Errorf("resolveUpper(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestStatsWritableLayerFromUpper: the upper dir the store named is measured, not the rootfs (a
// merged view that also holds the image's files), and without a mount table lookup.
func TestStatsWritableLayerFromUpper(t *testing.T) {
	root := t.TempDir()
	upper, merged := filepath.Join(root, "upper"), filepath.Join(root, "merged")
	for _, d := range []string{upper, merged} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(upper, "written"), make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(merged, "image-file"), make([]byte, 256<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	bytes, inodes, mp := writableLayerUsage(merged, upper)
	if mp != upper || inodes != 2 || bytes < 64<<10 || bytes >= 256<<10 {
		t.Fatalf("from upper: %d bytes, %d inodes at %s", bytes, inodes, mp)
	}
	// A record without an upper dir: the rootfs itself, which is not a mount here.
	if bytes, _, mp := writableLayerUsage(merged, ""); mp != merged || bytes < 256<<10 {
		t.Fatalf("without upper: %d bytes at %s", bytes, mp)
	}
}

// TestStatsMemoryUsageFromCgroup: a cgroup's memory as CRI gets it, available only under a limit.
func TestStatsMemoryUsageFromCgroup(t *testing.T) {
	m := memoryUsage(7, cgroupfs.Memory{Usage: 10 << 20, Limit: 64 << 20, InactiveFile: 2 << 20, RSS: 4 << 20, PgFault: 77, PgMajFault: 3})
	if m.Timestamp != 7 || m.WorkingSetBytes.GetValue() != 8<<20 || m.UsageBytes.GetValue() != 10<<20 || m.RssBytes.GetValue() != 4<<20 ||
		m.PageFaults.GetValue() != 77 || m.MajorPageFaults.GetValue() != 3 || m.AvailableBytes.GetValue() != 56<<20 {
		t.Errorf("limited: %v", m)
	}
	if m := memoryUsage(7, cgroupfs.Memory{Usage: 10 << 20, Unlimited: true}); m.AvailableBytes != nil || m.WorkingSetBytes.GetValue() != 10<<20 {
		t.Errorf("unlimited: %v", m)
	}
}
