package runtimetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/nodelet/nodelet/internal/cgroupfs"
)

// CgroupMounts lists the cgroup hierarchies' mount points (each v1 controller once, and the v2
// hierarchy, unified or not), as the runtime finds them.
func CgroupMounts() []string {
	hs, err := cgroupfs.Hierarchies("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.Path
	}
	return out
}

// checkNoCgroups fails the test if any cgroup remains under parent in any hierarchy, then removes
// parent itself (the test's default cgroup parent) depth-first.
func checkNoCgroups(t testing.TB, parent string) {
	for _, m := range CgroupMounts() {
		root := filepath.Join(m, parent)
		var dirs []string
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if dirs[i] != root {
				t.Errorf("cgroup left behind: %s", dirs[i])
			}
			os.Remove(dirs[i])
		}
	}
}
