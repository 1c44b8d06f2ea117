package runtimetest

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// CgroupMounts lists the cgroup hierarchies' mount points (each v1 controller once, and the v2
// hierarchy, unified or not).
func CgroupMounts() []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(fields) {
			continue
		}
		if fs := fields[sep+1]; fs == "cgroup" || fs == "cgroup2" {
			out = append(out, fields[4])
		}
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
