package cgroups

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

// TestStatsCgroupReadback makes a cgroup, puts this test's process in it, sets limits by hand
// and reads them and the usage back.
func TestStatsCgroupReadback(t *testing.T) {
	testutil.Require(t)
	b := make([]byte, 6)
	rand.Read(b)
	path := "/nodelet-cgtest-" + hex.EncodeToString(b)
	var dirs []string
	if Unified() {
		dirs = []string{filepath.Join(Root, path)}
	} else {
		for _, c := range []string{"cpu", "cpuacct", "memory", "pids"} {
			dirs = append(dirs, filepath.Join(Root, c, path))
		}
	}
	for _, d := range dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		d := d
		t.Cleanup(func() {
			if err := os.Remove(d); err != nil {
				t.Errorf("remove cgroup: %v", err)
			}
		})
	}
	write := func(rel, v string) {
		t.Helper()
		var p string
		if Unified() {
			p = filepath.Join(Root, path, filepath.Base(rel))
		} else {
			p = filepath.Join(Root, rel)
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	if Unified() {
		write("memory.max", "67108864")
		write("pids.max", "50")
	} else {
		write("memory"+path+"/memory.limit_in_bytes", "67108864")
		write("cpu"+path+"/cpu.shares", "512")
		write("cpu"+path+"/cpu.cfs_quota_us", "50000")
		write("pids"+path+"/pids.max", "50")
	}
	if !Exists(path) {
		t.Fatal("Exists = false")
	}
	l, err := ReadLimits(path)
	if err != nil {
		t.Fatal(err)
	}
	if l.MemoryLimit != 64<<20 || l.PidsMax != 50 || !Unified() && (l.CPUShares != 512 || l.CPUQuota != 50000) {
		t.Fatalf("limits: %+v", l)
	}
	s, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.MemoryLimit != 64<<20 {
		t.Fatalf("stats: %+v", s)
	}
	if n, err := OOMKills(path); err != nil || n != 0 {
		t.Fatalf("oom kills: %d %v", n, err)
	}
	if _, err := Read("/nodelet-no-such-cgroup-" + strconv.Itoa(os.Getpid())); err == nil {
		t.Fatal("reading a missing cgroup succeeded")
	}
}

// TestStatsCgroupV2Files reads a fake unified hierarchy: this machine runs v1, so v2 is checked
// against the files' documented formats.
func TestStatsCgroupV2Files(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "pods", "c1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"cpu.stat":       "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n",
		"memory.current": "10485760\n",
		"memory.max":     "67108864\n",
		"memory.stat":    "anon 4194304\nfile 6291456\ninactive_file 2097152\npgfault 77\npgmajfault 3\n",
		"pids.current":   "4\n",
		"pids.max":       "max\n",
		"cpu.weight":     "79\n",
		"cpu.max":        "50000 100000\n",
		"cpuset.cpus":    "0-1\n",
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := readV2(root, "/pods/c1")
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{CPUUsageNanos: 1500000, MemoryUsage: 10 << 20, WorkingSet: 8 << 20, RSS: 4 << 20, PageFaults: 77, MajorPageFaults: 3, MemoryLimit: 64 << 20, Pids: 4}
	if *s != want {
		t.Fatalf("stats %+v, want %+v", *s, want)
	}
	l, err := readLimits(root, "/pods/c1", true)
	if err != nil {
		t.Fatal(err)
	}
	// Shares 2048 map to weight 79 in the runtimes; the inverse lands within rounding.
	if l.CPUShares < 2000 || l.CPUShares > 2100 || l.CPUQuota != 50000 || l.CPUPeriod != 100000 || l.MemoryLimit != 64<<20 || l.PidsMax != -1 || l.CpusetCpus != "0-1" {
		t.Fatalf("limits %+v", l)
	}
}

func TestStatsCgroupV1Files(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"cpuacct/p/c/cpuacct.usage":        "123456789\n",
		"memory/p/c/memory.usage_in_bytes": "10485760\n",
		"memory/p/c/memory.limit_in_bytes": "9223372036854771712\n",
		"memory/p/c/memory.stat":           "cache 1\ntotal_inactive_file 1048576\ntotal_rss 5242880\ntotal_pgfault 9\ntotal_pgmajfault 1\n",
		"pids/p/c/pids.current":            "2\n",
	}
	for n, c := range files {
		p := filepath.Join(root, n)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s, err := readV1(root, "/p/c")
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{CPUUsageNanos: 123456789, MemoryUsage: 10 << 20, WorkingSet: 9 << 20, RSS: 5 << 20, PageFaults: 9, MajorPageFaults: 1, Pids: 2}
	if *s != want {
		t.Fatalf("stats %+v, want %+v", *s, want)
	}
}
