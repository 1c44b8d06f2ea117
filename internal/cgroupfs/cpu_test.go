package cgroupfs

import "testing"

func TestCPUStat(t *testing.T) {
	v2 := t.TempDir()
	writeFiles(t, v2, map[string]string{
		"cgroup.controllers": "cpu memory\n",
		"p/c/cpu.stat":       "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 10\nnr_throttled 4\nthrottled_usec 2000\n",
		"p/d/memory.current": "1\n",
	})
	fs := FS{Mount: v2, Version: Detect(v2)}
	if s, err := fs.CPUStat("/p/c"); err != nil || s != (CPUStat{1e6, 5e5, 10, 4, 2e6}) {
		t.Errorf("v2: %+v %v", s, err)
	}
	if _, err := fs.CPUStat("/p/d"); err == nil {
		t.Error("v2 cgroup without cpu.stat read")
	}

	v1 := t.TempDir()
	writeFiles(t, v1, map[string]string{
		"cpuacct/p/c/cpuacct.stat":  "user 150\nsystem 25\n",
		"cpu/p/c/cpu.stat":          "nr_periods 7\nnr_throttled 2\nthrottled_time 3000000\n",
		"cpuacct/p/d/cpuacct.stat":  "user 1\n",
		"cpuacct/p/e/cpuacct.stat":  "user 1\nsystem 2\n",
		"memory/cgroup.procs":       "",
		"cpuacct/cpuacct.usage":     "1\n",
		"cpu/cgroup.procs":          "",
		"cpuacct/p/c/cpuacct.usage": "1\n",
	})
	fs = FS{Mount: v1, Version: Detect(v1)}
	if s, err := fs.CPUStat("/p/c"); err != nil || s != (CPUStat{15e8, 25e7, 7, 2, 3e6}) {
		t.Errorf("v1: %+v %v", s, err)
	}
	if _, err := fs.CPUStat("/p/d"); err == nil {
		t.Error("v1 cpuacct.stat without system read")
	}
	// A cgroup never limited has no bandwidth figures: zeros, not an error.
	if s, err := fs.CPUStat("/p/e"); err != nil || s != (CPUStat{UserNanos: 1e7, SystemNanos: 2e7}) {
		t.Errorf("v1 without cpu.stat: %+v %v", s, err)
	}
}
