package server

import (
	"os"
	"path/filepath"
	"testing"
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
