// Package cgroups reads containers' resource usage and limits from their cgroups, on cgroup v1
// (one hierarchy per controller) and v2 (the unified hierarchy) alike. Paths are OCI
// linux.cgroupsPath values as the runtimes use them with cgroupfs: relative to each hierarchy's root.
package cgroups

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Root is where the hierarchies are mounted.
const Root = "/sys/fs/cgroup"

// Unified reports whether the host runs cgroup v2 only: Root itself is a cgroup2 mount. (A hybrid
// host mounts cgroup2 below it, without controllers, and counts as v1.)
func Unified() bool {
	mode.once.Do(func() {
		var st unix.Statfs_t
		mode.unified = unix.Statfs(Root, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
	})
	return mode.unified
}

var mode struct {
	once    sync.Once
	unified bool
}

// HasController reports whether the hierarchy the runtimes manage has the controller: its own v1
// hierarchy, or the v2 root's controllers on a unified host.
func HasController(name string) bool {
	if Unified() {
		for _, c := range strings.Fields(readString(filepath.Join(Root, "cgroup.controllers"))) {
			if c == name {
				return true
			}
		}
		return false
	}
	_, err := os.Stat(filepath.Join(Root, name, "cgroup.procs"))
	return err == nil
}

// Stats is one reading of a cgroup's usage.
type Stats struct {
	CPUUsageNanos   uint64 // cumulative
	MemoryUsage     uint64
	WorkingSet      uint64 // usage minus inactive file cache, as the kubelet counts it
	RSS             uint64
	PageFaults      uint64
	MajorPageFaults uint64
	MemoryLimit     uint64 // 0: none
	Pids            uint64
}

// Read samples the cgroup at path.
func Read(path string) (*Stats, error) {
	if Unified() {
		return readV2(Root, path)
	}
	return readV1(Root, path)
}

// readV1 reads the v1 controllers' files. (A cgroup library would link systemd, D-Bus and eBPF
// clients into the binary, whose inits every mode pays for in memory, for a few reads of flat files.)
func readV1(root, path string) (*Stats, error) {
	var s Stats
	usage, err := readInt(filepath.Join(root, "cpuacct", path, "cpuacct.usage"))
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", path, err)
	}
	s.CPUUsageNanos = uint64(usage)
	mem := filepath.Join(root, "memory", path)
	if v, err := readInt(filepath.Join(mem, "memory.usage_in_bytes")); err == nil {
		s.MemoryUsage = uint64(v)
	}
	if v, err := readInt(filepath.Join(mem, "memory.limit_in_bytes")); err == nil && v > 0 && v < 1<<62 {
		s.MemoryLimit = uint64(v)
	}
	if kv, err := readKV(filepath.Join(mem, "memory.stat")); err == nil {
		s.WorkingSet = sub(s.MemoryUsage, kv["total_inactive_file"])
		s.RSS = kv["total_rss"]
		s.PageFaults = kv["total_pgfault"]
		s.MajorPageFaults = kv["total_pgmajfault"]
	}
	if v, err := readInt(filepath.Join(root, "pids", path, "pids.current")); err == nil {
		s.Pids = uint64(v)
	}
	return &s, nil
}

func readV2(root, path string) (*Stats, error) {
	dir := filepath.Join(root, path)
	var s Stats
	cpu, err := readKV(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return nil, fmt.Errorf("cgroup %s: %w", path, err)
	}
	s.CPUUsageNanos = cpu["usage_usec"] * 1000
	if v, err := readInt(filepath.Join(dir, "memory.current")); err == nil {
		s.MemoryUsage = uint64(v)
	}
	if v, err := readInt(filepath.Join(dir, "memory.max")); err == nil && v > 0 {
		s.MemoryLimit = uint64(v)
	}
	if kv, err := readKV(filepath.Join(dir, "memory.stat")); err == nil {
		s.WorkingSet = sub(s.MemoryUsage, kv["inactive_file"])
		s.RSS = kv["anon"]
		s.PageFaults = kv["pgfault"]
		s.MajorPageFaults = kv["pgmajfault"]
	}
	if v, err := readInt(filepath.Join(dir, "pids.current")); err == nil {
		s.Pids = uint64(v)
	}
	return &s, nil
}

func sub(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

// OOMKills counts the OOM killer's victims in the cgroup (v1: memory.oom_control's oom_kill,
// kernel 4.13+; v2: memory.events' oom_kill). The cgroup lives until the runtime deletes the
// container, so an exit can be explained after the fact.
func OOMKills(path string) (uint64, error) {
	if path == "" {
		return 0, fmt.Errorf("no cgroup")
	}
	file, key := filepath.Join(Root, "memory", path, "memory.oom_control"), "oom_kill"
	if Unified() {
		file = filepath.Join(Root, path, "memory.events")
	}
	kv, err := readKV(file)
	if err != nil {
		return 0, err
	}
	return kv[key], nil
}

// Exists reports whether any hierarchy still has the cgroup.
func Exists(path string) bool {
	if Unified() {
		_, err := os.Stat(filepath.Join(Root, path))
		return err == nil
	}
	for _, ctrl := range []string{"memory", "cpu", "pids", "cpuacct", "devices", "freezer", "blkio", "cpuset"} {
		if _, err := os.Stat(filepath.Join(Root, ctrl, path)); err == nil {
			return true
		}
	}
	return false
}

// Limits are the resource limits the kernel enforces on a cgroup, as tests and status check them.
type Limits struct {
	CPUShares   uint64 // v2: cpu.weight converted back to shares
	CPUQuota    int64  // -1: none
	CPUPeriod   uint64
	MemoryLimit int64 // -1: none
	// SwapLimit is the swap the cgroup may use beyond its memory: v2's memory.swap.max, v1's
	// memory.memsw.limit_in_bytes less memory.limit_in_bytes. -1: unbounded, or no swap accounting.
	SwapLimit  int64
	CpusetCpus string
	PidsMax    int64 // -1: none
}

// ReadLimits reads the limits of the cgroup at path.
func ReadLimits(path string) (*Limits, error) {
	return readLimits(Root, path, Unified())
}

func readLimits(root, path string, unified bool) (*Limits, error) {
	l := &Limits{CPUQuota: -1, MemoryLimit: -1, SwapLimit: -1, PidsMax: -1}
	if unified {
		dir := filepath.Join(root, path)
		if w, err := readInt(filepath.Join(dir, "cpu.weight")); err == nil {
			// The runtimes' shares→weight mapping, inverted.
			l.CPUShares = uint64(2 + ((w-1)*262142)/9999)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "cpu.max")); err == nil {
			f := strings.Fields(string(b))
			if len(f) == 2 {
				if f[0] != "max" {
					l.CPUQuota, _ = strconv.ParseInt(f[0], 10, 64)
				}
				l.CPUPeriod, _ = strconv.ParseUint(f[1], 10, 64)
			}
		}
		if v, err := readInt(filepath.Join(dir, "memory.max")); err == nil {
			l.MemoryLimit = v
		}
		if v, err := readInt(filepath.Join(dir, "memory.swap.max")); err == nil {
			l.SwapLimit = v
		}
		if v, err := readInt(filepath.Join(dir, "pids.max")); err == nil {
			l.PidsMax = v
		}
		l.CpusetCpus = readString(filepath.Join(dir, "cpuset.cpus"))
		return l, nil
	}
	if v, err := readInt(filepath.Join(root, "cpu", path, "cpu.shares")); err == nil {
		l.CPUShares = uint64(v)
	} else {
		return nil, err
	}
	l.CPUQuota, _ = readInt(filepath.Join(root, "cpu", path, "cpu.cfs_quota_us"))
	if v, err := readInt(filepath.Join(root, "cpu", path, "cpu.cfs_period_us")); err == nil {
		l.CPUPeriod = uint64(v)
	}
	if v, err := readInt(filepath.Join(root, "memory", path, "memory.limit_in_bytes")); err == nil && v < 1<<62 {
		l.MemoryLimit = v
	}
	if v, err := readInt(filepath.Join(root, "memory", path, "memory.memsw.limit_in_bytes")); err == nil && v < 1<<62 && l.MemoryLimit >= 0 {
		l.SwapLimit = v - l.MemoryLimit
	}
	if v, err := readInt(filepath.Join(root, "pids", path, "pids.max")); err == nil {
		l.PidsMax = v
	}
	l.CpusetCpus = readString(filepath.Join(root, "cpuset", path, "cpuset.cpus"))
	return l, nil
}

func readString(p string) string {
	b, _ := os.ReadFile(p)
	return strings.TrimSpace(string(b))
}

// readInt reads a number; "max" reads as -1.
func readInt(p string) (int64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return -1, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

func readKV(p string) (map[string]uint64, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err == nil {
			out[k] = n
		}
	}
	return out, sc.Err()
}
