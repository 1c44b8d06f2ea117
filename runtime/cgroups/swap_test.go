package cgroups

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSwapAccountingFiles: v1 looks for memory.memsw.limit_in_bytes at the memory hierarchy's
// root, v2 for memory.swap.max in the process's own cgroup (the root has none).
func TestSwapAccountingFiles(t *testing.T) {
	root := t.TempDir()
	self := filepath.Join(t.TempDir(), "cgroup")
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if swapAccounting(root, self, false) {
		t.Fatal("v1 without memsw files: accounting reported")
	}
	write(filepath.Join(root, "memory", "memory.memsw.limit_in_bytes"), "9223372036854771712\n")
	if !swapAccounting(root, self, false) {
		t.Fatal("v1 with memsw files: no accounting reported")
	}
	write(self, "0::/system.slice/nodelet.service\n")
	if swapAccounting(root, self, true) {
		t.Fatal("v2 without memory.swap.max: accounting reported")
	}
	write(filepath.Join(root, "system.slice", "nodelet.service", "memory.swap.max"), "max\n")
	if !swapAccounting(root, self, true) {
		t.Fatal("v2 with memory.swap.max: no accounting reported")
	}
	write(self, "0::/\n")
	if swapAccounting(root, self, true) {
		t.Fatal("v2 at the root, which has no memory.swap.max: accounting reported")
	}
}

// TestSwapLimitRead: the swap beyond memory a cgroup allows, from v1's memsw and v2's swap.max.
func TestSwapLimitRead(t *testing.T) {
	root := t.TempDir()
	for f, v := range map[string]string{
		"cpu/pod/c/cpu.shares":                     "2",
		"memory/pod/c/memory.limit_in_bytes":       "67108864",
		"memory/pod/c/memory.memsw.limit_in_bytes": "67108864",
		"memory/pod/d/memory.limit_in_bytes":       "9223372036854771712",
		"memory/pod/d/memory.memsw.limit_in_bytes": "9223372036854771712",
		"cpu/pod/d/cpu.shares":                     "2",
		"v2/pod/c/memory.max":                      "67108864",
		"v2/pod/c/memory.swap.max":                 "0",
		"v2/pod/d/memory.swap.max":                 "max",
	} {
		p := filepath.Join(root, f)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		root, path string
		unified    bool
		want       int64
	}{
		{root, "/pod/c", false, 0},
		{root, "/pod/d", false, -1},
		{filepath.Join(root, "v2"), "/pod/c", true, 0},
		{filepath.Join(root, "v2"), "/pod/d", true, -1},
	} {
		l, err := readLimits(tc.root, tc.path, tc.unified)
		if err != nil {
			t.Fatal(err)
		}
		if l.SwapLimit != tc.want {
			t.Errorf("%s (v2 %v): swap limit %d, want %d", tc.path, tc.unified, l.SwapLimit, tc.want)
		}
	}
}
