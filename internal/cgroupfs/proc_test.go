package cgroupfs

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestParseProcCgroup(t *testing.T) {
	hybrid := "12:memory:/system.slice/nodelet.service\n5:cpu,cpuacct:/system.slice\n1:name=systemd:/system.slice/nodelet.service\n0::/system.slice/nodelet.service\n"
	p := ParseProcCgroup([]byte(hybrid))
	want := Paths{Unified: "/system.slice/nodelet.service", V1: map[string]string{
		"memory": "/system.slice/nodelet.service", "cpu": "/system.slice", "cpuacct": "/system.slice",
		"name=systemd": "/system.slice/nodelet.service",
	}}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("hybrid: %+v", p)
	}
	if got := p.Path(FS{Version: V1}, "cpuacct"); got != "/system.slice" {
		t.Errorf("v1 cpuacct path %q", got)
	}
	if got := p.Path(FS{Version: V2}, "cpuacct"); got != "/system.slice/nodelet.service" {
		t.Errorf("v2 path %q", got)
	}
	if p := ParseProcCgroup([]byte("0::/\n")); p.Unified != "/" || len(p.V1) != 0 {
		t.Errorf("v2: %+v", p)
	}
	if p := ParseProcCgroup(nil); p.Unified != "" || len(p.V1) != 0 {
		t.Errorf("empty: %+v", p)
	}
}

// TestSwapAccountingFiles: v1 looks for memory.memsw.limit_in_bytes at the memory hierarchy's
// root, v2 for memory.swap.max in the process's own cgroup (the root has none).
func TestSwapAccountingFiles(t *testing.T) {
	root := t.TempDir()
	self := filepath.Join(t.TempDir(), "cgroup")
	v1, v2 := FS{root, V1}, FS{root, V2}
	if v1.SwapAccounting(self) {
		t.Fatal("v1 without memsw files: accounting reported")
	}
	writeFiles(t, root, map[string]string{"memory/memory.memsw.limit_in_bytes": "9223372036854771712\n"})
	if !v1.SwapAccounting(self) {
		t.Fatal("v1 with memsw files: no accounting reported")
	}
	if v2.SwapAccounting(self) {
		t.Fatal("v2 without /proc/self/cgroup: accounting reported")
	}
	if err := os.WriteFile(self, []byte("0::/system.slice/nodelet.service\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v2.SwapAccounting(self) {
		t.Fatal("v2 without memory.swap.max: accounting reported")
	}
	writeFiles(t, root, map[string]string{"system.slice/nodelet.service/memory.swap.max": "max\n"})
	if !v2.SwapAccounting(self) {
		t.Fatal("v2 with memory.swap.max: no accounting reported")
	}
	if err := os.WriteFile(self, []byte("0::/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v2.SwapAccounting(self) {
		t.Fatal("v2 at the root, which has no memory.swap.max: accounting reported")
	}
}

// TestSwapLimitRead: the swap beyond memory a cgroup allows, from v1's memsw and v2's swap.max.
func TestSwapLimitRead(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{}
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
		files[f] = v + "\n"
	}
	writeFiles(t, root, files)
	for _, tc := range []struct {
		fs   FS
		path string
		want int64
	}{
		{FS{root, V1}, "/pod/c", 0},
		{FS{root, V1}, "/pod/d", -1},
		{FS{filepath.Join(root, "v2"), V2}, "/pod/c", 0},
		{FS{filepath.Join(root, "v2"), V2}, "/pod/d", -1},
	} {
		l, err := tc.fs.Limits(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		if l.SwapLimit != tc.want {
			t.Errorf("%s (%v): swap limit %d, want %d", tc.path, tc.fs.Version, l.SwapLimit, tc.want)
		}
	}
}

// TestHierarchies: each hierarchy once, only where mounted at its root, with cgroup2 and cpuset
// told apart.
func TestHierarchies(t *testing.T) {
	mountinfo := filepath.Join(t.TempDir(), "mountinfo")
	body := `25 30 0:22 / /sys rw,nosuid - sysfs sysfs rw
26 25 0:23 / /sys/fs/cgroup ro - tmpfs tmpfs ro,mode=755
27 26 0:24 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw,nsdelegate
31 26 0:28 / /sys/fs/cgroup/cpuset rw shared:12 - cgroup cgroup rw,cpuset
32 26 0:29 / /sys/fs/cgroup/memory rw shared:13 - cgroup cgroup rw,memory
33 26 0:30 / /sys/fs/cgroup/cpu,cpuacct rw shared:14 - cgroup cgroup rw,cpu,cpuacct
90 80 0:29 / /var/lib/x/memory rw - cgroup cgroup rw,memory
91 80 0:30 /kubepods /var/lib/y rw - cgroup cgroup rw,cpu,cpuacct
`
	if err := os.WriteFile(mountinfo, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	hs, err := Hierarchies(mountinfo)
	if err != nil {
		t.Fatal(err)
	}
	want := []Hierarchy{
		{Path: "/sys/fs/cgroup/unified", V2: true},
		{Path: "/sys/fs/cgroup/cpuset", Cpuset: true},
		{Path: "/sys/fs/cgroup/memory"},
		{Path: "/sys/fs/cgroup/cpu,cpuacct"},
	}
	if !reflect.DeepEqual(hs, want) {
		t.Errorf("hierarchies %+v", hs)
	}
	if err := os.WriteFile(mountinfo, []byte("25 30 0:22 / /sys rw,nosuid - sysfs sysfs rw\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Hierarchies(mountinfo); err == nil {
		t.Error("no hierarchy, no error")
	}
}
