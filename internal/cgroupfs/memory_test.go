package cgroupfs

import (
	"path/filepath"
	"testing"
)

// TestWorkingSet is cAdvisor's rule: usage less inactive file, floored at 0; a memory.stat
// without the key leaves the usage.
func TestWorkingSet(t *testing.T) {
	for _, tc := range []struct {
		name string
		m    Memory
		ws   uint64
	}{
		{"inactive below usage", Memory{Usage: 1000, InactiveFile: 300}, 700},
		{"inactive above usage", Memory{Usage: 100, InactiveFile: 300}, 0},
		{"no inactive key", Memory{Usage: 1000}, 1000},
		{"nothing", Memory{}, 0},
	} {
		if ws := tc.m.WorkingSet(); ws != tc.ws {
			t.Errorf("%s: %d, want %d", tc.name, ws, tc.ws)
		}
	}
}

// TestAvailable is the kubelet's limit − working set, only under a limit.
func TestAvailable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		m     Memory
		avail uint64
		ok    bool
	}{
		{"limit above working set", Memory{Usage: 1000, InactiveFile: 100, Limit: 4000}, 3100, true},
		{"working set above limit", Memory{Usage: 5000, Limit: 4000}, 0, true},
		{"unlimited", Memory{Usage: 1000, Limit: 4000, Unlimited: true}, 0, false},
		{"limit 0 is none", Memory{Usage: 1000}, 0, false},
	} {
		if a, ok := tc.m.Available(); a != tc.avail || ok != tc.ok {
			t.Errorf("%s: %d %v, want %d %v", tc.name, a, ok, tc.avail, tc.ok)
		}
	}
}

// TestUnlimited: v2 "max", v1 from 1<<62 up (the kernel's page-rounded default), or no limit file.
func TestUnlimited(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"v1/memory/a/memory.usage_in_bytes": "1\n", "v1/memory/a/memory.limit_in_bytes": "9223372036854771712\n",
		"v1/memory/b/memory.usage_in_bytes": "1\n", "v1/memory/b/memory.limit_in_bytes": "4611686018427387904\n",
		"v1/memory/c/memory.usage_in_bytes": "1\n", "v1/memory/c/memory.limit_in_bytes": "4611686018427387903\n",
		"v1/memory/d/memory.usage_in_bytes": "1\n",
		"v2/a/memory.current":               "1\n", "v2/a/memory.max": "max\n",
		"v2/b/memory.current": "1\n", "v2/b/memory.max": "4611686018427387904\n",
	})
	for _, tc := range []struct {
		fs        FS
		path      string
		unlimited bool
	}{
		{FS{filepath.Join(root, "v1"), V1}, "/a", true},
		{FS{filepath.Join(root, "v1"), V1}, "/b", true},
		{FS{filepath.Join(root, "v1"), V1}, "/c", false},
		{FS{filepath.Join(root, "v1"), V1}, "/d", true},
		{FS{filepath.Join(root, "v2"), V2}, "/a", true},
		{FS{filepath.Join(root, "v2"), V2}, "/b", true},
	} {
		m, err := tc.fs.Memory(tc.path)
		if err != nil || m.Unlimited != tc.unlimited {
			t.Errorf("%v %s: %+v %v, want unlimited %v", tc.fs.Version, tc.path, m, err, tc.unlimited)
		}
	}
}

// TestRootMemory: the machine's memory is the root cgroup's limit; the v2 root, which has no
// memory.current, counts anon + file as its usage.
func TestRootMemory(t *testing.T) {
	root := t.TempDir()
	meminfo := filepath.Join(root, "meminfo")
	writeFiles(t, root, map[string]string{
		"meminfo":                         "MemTotal:        4194304 kB\nMemFree:         1048576 kB\nMemAvailable:    2097152 kB\n",
		"v1/memory/memory.usage_in_bytes": "3221225472\n",
		"v1/memory/memory.stat":           "cache 5\ntotal_inactive_file 1073741824\ntotal_rss 1024\n",
		"v2/cgroup.controllers":           "memory\n",
		"v2/memory.stat":                  "anon 1073741824\nfile 1073741824\ninactive_file 536870912\n",
	})
	m, err := FS{filepath.Join(root, "v1"), V1}.RootMemory(meminfo)
	if err != nil || m.Usage != 3<<30 || m.Limit != 4<<30 || m.WorkingSet() != 2<<30 || m.RSS != 1024 {
		t.Errorf("v1: %+v %v", m, err)
	}
	if a, ok := m.Available(); !ok || a != 2<<30 {
		t.Errorf("v1 available %d %v", a, ok)
	}
	m, err = FS{filepath.Join(root, "v2"), V2}.RootMemory(meminfo)
	if err != nil || m.Usage != 2<<30 || m.Limit != 4<<30 || m.WorkingSet() != 3<<29 || m.RSS != 1<<30 {
		t.Errorf("v2: %+v %v", m, err)
	}
	if _, err := (FS{filepath.Join(root, "nosuch"), V1}).RootMemory(meminfo); err == nil {
		t.Error("v1 root without a memory hierarchy read")
	}
	writeFiles(t, root, map[string]string{"bad": "MemFree: 1 kB\n"})
	if _, err := (FS{filepath.Join(root, "v2"), V2}).RootMemory(filepath.Join(root, "bad")); err == nil {
		t.Error("meminfo without MemTotal read")
	}
}
