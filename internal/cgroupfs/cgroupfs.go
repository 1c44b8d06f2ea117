// Package cgroupfs is the one place that knows how the cgroup filesystem is laid out: which
// version the host runs, where a controller's files are for a cgroup, and how the kernel's files
// are read into numbers. Both halves of the binary use it: the runtime for its containers' stats
// and limits, the agent for its QoS cgroups, summary and eviction signals.
//
// It only reads. The writers (the agent's limits, the runtime's pod cgroups) stay with their
// owners and take their paths from here. Paths are cgroupfs names ("/kubepods/burstable"),
// relative to each hierarchy's root.
//
// The package has no init and depends on nothing but the standard library and x/sys/unix: every
// mode of the binary links it.
package cgroupfs

import (
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Mount is where the hierarchies are mounted.
const Mount = "/sys/fs/cgroup"

// Version is the cgroup version the host's controllers are managed in.
type Version int

const (
	// V1 is one hierarchy per controller under Mount. A hybrid host (cgroup2 mounted at
	// Mount/unified beside the v1 hierarchies) is V1 too, as runc's IsCgroup2UnifiedMode and so
	// cAdvisor and the kubelet count it: the controllers that matter are in the v1 hierarchies.
	V1 Version = 1
	// V2 is the unified hierarchy mounted at Mount itself.
	V2 Version = 2
)

func (v Version) String() string {
	if v == V2 {
		return "v2"
	}
	return "v1"
}

// Detect tells the version of the hierarchies at mount: V2 when mount is itself a cgroup2
// filesystem. A folder that only looks like one (a test's fixture) counts as V2 when it has the
// cgroup2 root's cgroup.controllers; on a real host both tests agree, since a v1 or hybrid
// Mount is a tmpfs holding only the hierarchies' mount points.
func Detect(mount string) Version {
	var st unix.Statfs_t
	if unix.Statfs(mount, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC {
		return V2
	}
	if _, err := os.Stat(filepath.Join(mount, "cgroup.controllers")); err == nil {
		return V2
	}
	return V1
}

// FS is a cgroup filesystem: its mount point and version.
type FS struct {
	Mount   string
	Version Version
}

// host is detected once: the layout does not change without a reboot.
var host struct {
	once sync.Once
	fs   FS
}

// Host is this machine's cgroup filesystem at Mount.
func Host() FS {
	host.once.Do(func() { host.fs = FS{Mount: Mount, Version: Detect(Mount)} })
	return host.fs
}

// Unified reports cgroup v2.
func (f FS) Unified() bool { return f.Version == V2 }

// Dir is the folder of the cgroup path in the hierarchy holding ctrl: the same folder for every
// controller on v2, the controller's own hierarchy on v1. cpuacct is looked for under its own
// name first, then as the co-mounted cpu,cpuacct (a host without the cpuacct symlink).
func (f FS) Dir(ctrl, path string) string {
	if f.Unified() {
		return filepath.Join(f.Mount, path)
	}
	if ctrl == "cpuacct" {
		if _, err := os.Stat(filepath.Join(f.Mount, "cpuacct")); err != nil {
			if _, err := os.Stat(filepath.Join(f.Mount, "cpu,cpuacct")); err == nil {
				ctrl = "cpu,cpuacct"
			}
		}
	}
	return filepath.Join(f.Mount, ctrl, path)
}

// HasController reports whether the controller can be used where cgroups are managed: its own
// v1 hierarchy, or among the v2 root's controllers. (On a hybrid host a controller bound only to
// the unified hierarchy, as hugetlb can be, does not count.)
func (f FS) HasController(name string) bool {
	if f.Unified() {
		for _, c := range strings.Fields(readString(filepath.Join(f.Mount, "cgroup.controllers"))) {
			if c == name {
				return true
			}
		}
		return false
	}
	_, err := os.Stat(filepath.Join(f.Mount, name, "cgroup.procs"))
	return err == nil
}

// v1Controllers are the hierarchies Exists looks in on v1.
var v1Controllers = [...]string{"memory", "cpu", "pids", "cpuacct", "devices", "freezer", "blkio", "cpuset"}

// Exists reports whether any hierarchy still has the cgroup.
func (f FS) Exists(path string) bool {
	if f.Unified() {
		_, err := os.Stat(filepath.Join(f.Mount, path))
		return err == nil
	}
	for _, ctrl := range v1Controllers {
		if _, err := os.Stat(filepath.Join(f.Mount, ctrl, path)); err == nil {
			return true
		}
	}
	return false
}

// HybridControllers are the controllers bound to the cgroup2 hierarchy of a hybrid host
// (Mount/unified beside the v1 ones), such as hugetlb when no v1 hierarchy mounts it. None on a
// v2 host, or a v1 host without the unified mount.
func (f FS) HybridControllers() []string {
	if f.Unified() {
		return nil
	}
	return strings.Fields(readString(filepath.Join(f.Mount, "unified", "cgroup.controllers")))
}
