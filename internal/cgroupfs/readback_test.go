package cgroupfs_test

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/nodelet/nodelet/internal/cgroupfs"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// TestReadbackOnThisHost makes a cgroup on the real machine, sets limits by hand and reads them
// and the usage back. (It needs root and writes under /sys/fs/cgroup.)
func TestReadbackOnThisHost(t *testing.T) {
	testutil.Require(t)
	fs := cgroupfs.Host()
	b := make([]byte, 6)
	rand.Read(b)
	path := "/nodelet-cgtest-" + hex.EncodeToString(b)
	var dirs []string
	if fs.Unified() {
		dirs = []string{filepath.Join(fs.Mount, path)}
	} else {
		for _, c := range []string{"cpu", "cpuacct", "memory", "pids"} {
			dirs = append(dirs, fs.Dir(c, path))
		}
	}
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := os.Remove(d); err != nil {
				t.Errorf("remove cgroup: %v", err)
			}
		})
	}
	write := func(ctrl, file, v string) {
		t.Helper()
		p := filepath.Join(fs.Dir(ctrl, path), file)
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	if fs.Unified() {
		write("memory", "memory.max", "67108864")
		write("pids", "pids.max", "50")
	} else {
		write("memory", "memory.limit_in_bytes", "67108864")
		write("cpu", "cpu.shares", "512")
		write("cpu", "cpu.cfs_quota_us", "50000")
		write("pids", "pids.max", "50")
	}
	if !fs.Exists(path) {
		t.Fatal("Exists = false")
	}
	l, err := fs.Limits(path)
	if err != nil {
		t.Fatal(err)
	}
	if l.MemoryLimit != 64<<20 || l.PidsMax != 50 || !fs.Unified() && (l.CPUShares != 512 || l.CPUQuota != 50000) {
		t.Fatalf("limits: %+v", l)
	}
	if _, err := fs.CPUUsageNanos(path); err != nil {
		t.Fatal(err)
	}
	m, err := fs.Memory(path)
	if err != nil || m.Limit != 64<<20 || m.Unlimited {
		t.Fatalf("memory: %+v %v", m, err)
	}
	if n, err := fs.OOMKills(path); err != nil || n != 0 {
		t.Fatalf("oom kills: %d %v", n, err)
	}
	missing := "/nodelet-no-such-cgroup-" + strconv.Itoa(os.Getpid())
	if _, err := fs.CPUUsageNanos(missing); err == nil {
		t.Fatal("reading a missing cgroup succeeded")
	}
	if _, err := fs.RootMemory("/proc/meminfo"); err != nil {
		t.Fatal(err)
	}
}
