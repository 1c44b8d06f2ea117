package cm

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

// hierarchies are the folders a cgroup named name lives in on this host.
func hierarchies(c Cgroups, name string) []string {
	if c.Unified {
		return []string{filepath.Join(c.Mount, name)}
	}
	var out []string
	for _, s := range c.v1Subsystems() {
		out = append(out, filepath.Join(c.Mount, s, name))
	}
	return out
}

// The manager on this host's kernel cgroups, under a cgroup root of the test's own so nothing
// another agent on the machine uses is touched; it is removed after, and checked to be gone.
func TestHostCgroupsEnforced(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatalf("writing cgroups needs root: run the test as root (%s)", testutil.InstallHint)
	}
	c := HostCgroups()
	if !c.Unified && len(c.v1Subsystems()) < 3 {
		t.Fatalf("no cgroup v1 cpu/memory/pids hierarchies under %s and no cgroup2 with controllers: mount them (Debian mounts them at boot)", c.Mount)
	}
	b := make([]byte, 4)
	rand.Read(b)
	root := "/nodelet-test-" + hex.EncodeToString(b)
	t.Cleanup(func() {
		dirs := hierarchies(c, root)
		for _, d := range dirs {
			testutil.RemoveCgroupTree(d)
		}
		for _, d := range dirs {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("cgroup %s left behind", d)
			}
		}
	})
	system := root + "/system"
	for _, d := range hierarchies(c, system) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	m, err := New(Config{MaxPods: 110, RootDir: t.TempDir(), PodsCgroup: root + "/kubepods",
		SystemReserved:         rl("cpu", "500m", "memory", "256Mi", "pid", "100"),
		EnforceNodeAllocatable: []string{"pods", "system-reserved"}, SystemReservedCgroup: system},
		Deps{Cgroups: &c})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Enforce(); err != nil {
		t.Fatal(err)
	}
	_, internal := m.read()
	cpu, mem, pid := internal["cpu"], internal["memory"], internal[ResourcePID]
	page := int64(os.Getpagesize())
	wantMem := mem.Value() - 256<<20
	wantMem -= wantMem % page // the kernel keeps whole pages
	shares := MilliCPUToShares(cpu.MilliValue() - 500)
	read := func(sub, name, file string) string {
		p := filepath.Join(c.Mount, sub, name, file)
		if c.Unified {
			p = filepath.Join(c.Mount, name, file)
		}
		return readFile(t, p)
	}
	if c.Unified {
		for file, want := range map[string]string{
			"cpu.weight": fmt.Sprint(SharesToWeight(shares)), "memory.max": fmt.Sprint(wantMem), "pids.max": fmt.Sprint(pid.Value() - 100),
		} {
			if got := read("", root+"/kubepods", file); got != want {
				t.Errorf("kubepods %s = %s, want %s", file, got, want)
			}
		}
		if got := read("", system, "memory.max"); got != strconv.Itoa(256<<20) {
			t.Errorf("system memory.max %s", got)
		}
		return
	}
	for _, f := range []struct{ sub, name, file, want string }{
		{"cpu", root + "/kubepods", "cpu.shares", fmt.Sprint(shares)},
		{"memory", root + "/kubepods", "memory.limit_in_bytes", fmt.Sprint(wantMem)},
		{"pids", root + "/kubepods", "pids.max", fmt.Sprint(pid.Value() - 100)},
		{"cpu", system, "cpu.shares", "512"},
		{"memory", system, "memory.limit_in_bytes", strconv.Itoa(256 << 20)},
		{"pids", system, "pids.max", "100"},
	} {
		if got := read(f.sub, f.name, f.file); got != f.want {
			t.Errorf("%s %s %s = %s, want %s", f.sub, f.name, f.file, got, f.want)
		}
	}
	// Enforcing again (a restarted agent) changes nothing and does not fail on the existing cgroups.
	if err := m.Enforce(); err != nil {
		t.Errorf("second enforcement: %v", err)
	}
}
