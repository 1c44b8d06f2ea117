package cgroups

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/nodelet/nodelet/internal/testutil"
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
