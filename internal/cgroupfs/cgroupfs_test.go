package cgroupfs

import (
	"os"
	"path/filepath"
	"testing"
)

// writeFiles makes each file (a path relative to root) with its content.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for n, c := range files {
		p := filepath.Join(root, n)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDetectFixtures: a folder is v2 when it has the cgroup2 root's cgroup.controllers, v1
// otherwise (a hybrid layout with cgroup2 at unified/ included).
func TestDetectFixtures(t *testing.T) {
	v1 := t.TempDir()
	writeFiles(t, v1, map[string]string{"memory/memory.usage_in_bytes": "1\n", "unified/cgroup.controllers": "hugetlb\n"})
	if v := Detect(v1); v != V1 {
		t.Errorf("v1 (hybrid) fixture: %v", v)
	}
	v2 := t.TempDir()
	writeFiles(t, v2, map[string]string{"cgroup.controllers": "cpu memory\n"})
	if v := Detect(v2); v != V2 {
		t.Errorf("v2 fixture: %v", v)
	}
	if v := Detect(filepath.Join(v1, "nosuch")); v != V1 {
		t.Errorf("missing mount: %v", v)
	}
	if c := (FS{v1, V1}).HybridControllers(); len(c) != 1 || c[0] != "hugetlb" {
		t.Errorf("hybrid controllers %v", c)
	}
	if c := (FS{v2, V2}).HybridControllers(); c != nil {
		t.Errorf("v2 hybrid controllers %v", c)
	}
}

// TestHostAgreesWithBothTests: on the real host the statfs magic and the cgroup.controllers
// file give the same answer (only reads).
func TestHostAgreesWithBothTests(t *testing.T) {
	_, err := os.Stat(filepath.Join(Mount, "cgroup.controllers"))
	if got := Host(); (got.Version == V2) != (err == nil) || got.Mount != Mount {
		t.Errorf("Host() = %+v, cgroup.controllers there: %v", got, err == nil)
	}
}

func TestV2Files(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"cgroup.controllers":       "cpu memory pids\n",
		"pods/c1/cpu.stat":         "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n",
		"pods/c1/memory.current":   "10485760\n",
		"pods/c1/memory.max":       "67108864\n",
		"pods/c1/memory.stat":      "anon 4194304\nfile 6291456\ninactive_file 2097152\npgfault 77\npgmajfault 3\n",
		"pods/c1/memory.events":    "low 0\nhigh 0\nmax 4\noom 1\noom_kill 1\n",
		"pods/c1/pids.current":     "4\n",
		"pods/c1/pids.max":         "max\n",
		"pods/c1/cpu.weight":       "79\n",
		"pods/c1/cpu.max":          "50000 100000\n",
		"pods/c1/cpuset.cpus":      "0-1\n",
		"pods/c2/memory.current":   "100\n",
		"pods/c2/memory.max":       "max\n",
		"pods/c2/memory.stat":      "anon 100\n",
		"pods/c2/cpu.stat":         "user_usec 1\n",
		"pods/c2/memory.swap.max":  "max\n",
		"pods/c1/memory.swap.max":  "0\n",
		"pods/c1/cgroup.procs":     "",
		"pods/c2/cgroup.procs":     "",
		"pods/c1/memory.oom_group": "0\n",
	})
	fs := FS{Mount: root, Version: Detect(root)}
	if fs.Version != V2 {
		t.Fatalf("detected %v", fs.Version)
	}
	cpu, err := fs.CPUUsageNanos("/pods/c1")
	if err != nil || cpu != 1500000 {
		t.Errorf("cpu %d %v", cpu, err)
	}
	if _, err := fs.CPUUsageNanos("/pods/c2"); err == nil {
		t.Error("cpu.stat without usage_usec read")
	}
	m, err := fs.Memory("/pods/c1")
	want := Memory{Usage: 10 << 20, Limit: 64 << 20, InactiveFile: 2 << 20, RSS: 4 << 20, PgFault: 77, PgMajFault: 3, Cache: 6 << 20, HasStat: true}
	if err != nil || m != want {
		t.Errorf("memory %+v %v, want %+v", m, err, want)
	}
	if ws := m.WorkingSet(); ws != 8<<20 {
		t.Errorf("working set %d", ws)
	}
	if a, ok := m.Available(); !ok || a != 56<<20 {
		t.Errorf("available %d %v", a, ok)
	}
	if m, err := fs.Memory("/pods/c2"); err != nil || !m.Unlimited {
		t.Errorf("memory.max max: %+v %v", m, err)
	}
	if _, err := fs.Memory("/pods/nosuch"); err == nil {
		t.Error("memory of a missing cgroup read")
	}
	if n, err := fs.Pids("/pods/c1"); err != nil || n != 4 {
		t.Errorf("pids %d %v", n, err)
	}
	if n, err := fs.OOMKills("/pods/c1"); err != nil || n != 1 {
		t.Errorf("oom kills %d %v", n, err)
	}
	l, err := fs.Limits("/pods/c1")
	if err != nil {
		t.Fatal(err)
	}
	// Shares 2048 map to weight 79 in the runtimes; the inverse lands within rounding.
	if l.CPUShares < 2000 || l.CPUShares > 2100 || l.CPUQuota != 50000 || l.CPUPeriod != 100000 || l.MemoryLimit != 64<<20 || l.PidsMax != -1 || l.CpusetCpus != "0-1" || l.SwapLimit != 0 {
		t.Errorf("limits %+v", l)
	}
	if !fs.Exists("/pods/c2") || fs.Exists("/pods/nosuch") {
		t.Error("Exists")
	}
	if !fs.HasController("pids") || fs.HasController("hugetlb") {
		t.Error("HasController")
	}
	if d := fs.Dir("cpuacct", "/pods/c1"); d != filepath.Join(root, "pods/c1") {
		t.Errorf("Dir %s", d)
	}
}

func TestV1Files(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"cpuacct/p/c/cpuacct.usage":        "123456789\n",
		"memory/p/c/memory.usage_in_bytes": "10485760\n",
		"memory/p/c/memory.limit_in_bytes": "9223372036854771712\n",
		"memory/p/c/memory.stat":           "cache 1\ntotal_inactive_file 1048576\ntotal_rss 5242880\ntotal_pgfault 9\ntotal_pgmajfault 1\n",
		"memory/p/c/memory.oom_control":    "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
		"memory/p/d/memory.usage_in_bytes": "100\n",
		"memory/p/d/memory.limit_in_bytes": "4096\n",
		"memory/cgroup.procs":              "",
		"pids/p/c/pids.current":            "2\n",
		"cpu/p/c/cpu.shares":               "512\n",
		"cpu/p/c/cpu.cfs_quota_us":         "50000\n",
		"cpu/p/c/cpu.cfs_period_us":        "100000\n",
		"cpuset/p/c/cpuset.cpus":           "0\n",
	})
	fs := FS{Mount: root, Version: Detect(root)}
	if fs.Version != V1 {
		t.Fatalf("detected %v", fs.Version)
	}
	if cpu, err := fs.CPUUsageNanos("/p/c"); err != nil || cpu != 123456789 {
		t.Errorf("cpu %d %v", cpu, err)
	}
	m, err := fs.Memory("/p/c")
	want := Memory{Usage: 10 << 20, InactiveFile: 1 << 20, RSS: 5 << 20, PgFault: 9, PgMajFault: 1, Unlimited: true, HasStat: true}
	if err != nil || m != want {
		t.Errorf("memory %+v %v, want %+v", m, err, want)
	}
	if _, ok := m.Available(); ok {
		t.Error("available without a limit")
	}
	// No memory.stat: the working set is the usage.
	if m, err := fs.Memory("/p/d"); err != nil || m.Limit != 4096 || m.Unlimited || m.WorkingSet() != 100 {
		t.Errorf("memory without memory.stat: %+v %v", m, err)
	}
	if n, err := fs.Pids("/p/c"); err != nil || n != 2 {
		t.Errorf("pids %d %v", n, err)
	}
	if n, err := fs.OOMKills("/p/c"); err != nil || n != 2 {
		t.Errorf("oom kills %d %v", n, err)
	}
	if _, err := fs.OOMKills(""); err == nil {
		t.Error("oom kills of no cgroup")
	}
	l, err := fs.Limits("/p/c")
	if err != nil || l.CPUShares != 512 || l.CPUQuota != 50000 || l.CPUPeriod != 100000 || l.MemoryLimit != -1 || l.SwapLimit != -1 || l.PidsMax != -1 || l.CpusetCpus != "0" {
		t.Errorf("limits %+v %v", l, err)
	}
	if _, err := fs.Limits("/p/d"); err == nil {
		t.Error("v1 limits without cpu.shares")
	}
	if !fs.Exists("/p/d") || fs.Exists("/p/nosuch") {
		t.Error("Exists")
	}
	if !fs.HasController("memory") || fs.HasController("hugetlb") {
		t.Error("HasController")
	}
}

// TestCpuacctCoMounted: a host whose cpuacct hierarchy is only there as cpu,cpuacct.
func TestCpuacctCoMounted(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"cpu,cpuacct/k/cpuacct.usage": "42\n"})
	fs := FS{Mount: root, Version: V1}
	if cpu, err := fs.CPUUsageNanos("/k"); err != nil || cpu != 42 {
		t.Errorf("cpu %d %v", cpu, err)
	}
	if d := fs.Dir("cpuacct", "/k"); d != filepath.Join(root, "cpu,cpuacct", "k") {
		t.Errorf("Dir %s", d)
	}
}
