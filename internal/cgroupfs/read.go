package cgroupfs

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// CPUUsageNanos is the cgroup's cumulative CPU time: v1 cpuacct.usage, v2 cpu.stat's usage_usec.
func (f FS) CPUUsageNanos(path string) (uint64, error) {
	if !f.Unified() {
		return readUint(filepath.Join(f.Dir("cpuacct", path), "cpuacct.usage"))
	}
	p := filepath.Join(f.Dir("cpu", path), "cpu.stat")
	kv, err := readKV(p)
	if err != nil {
		return 0, err
	}
	usec, ok := kv["usage_usec"]
	if !ok {
		return 0, fmt.Errorf("%s: no usage_usec", p)
	}
	return usec * 1000, nil
}

// Pids is the number of tasks in the cgroup (pids.current).
func (f FS) Pids(path string) (uint64, error) {
	return readUint(filepath.Join(f.Dir("pids", path), "pids.current"))
}

// OOMKills counts the OOM killer's victims in the cgroup (v1: memory.oom_control's oom_kill,
// kernel 4.13+; v2: memory.events' oom_kill). A cgroup lives until its owner removes it, so an
// exit can be explained after the fact.
func (f FS) OOMKills(path string) (uint64, error) {
	if path == "" {
		return 0, errors.New("no cgroup")
	}
	file := "memory.oom_control"
	if f.Unified() {
		file = "memory.events"
	}
	kv, err := readKV(filepath.Join(f.Dir("memory", path), file))
	if err != nil {
		return 0, err
	}
	return kv["oom_kill"], nil
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

// Limits reads the limits of the cgroup at path. On v1 a cgroup without cpu.shares is an error.
func (f FS) Limits(path string) (*Limits, error) {
	l := &Limits{CPUQuota: -1, MemoryLimit: -1, SwapLimit: -1, PidsMax: -1}
	if f.Unified() {
		dir := filepath.Join(f.Mount, path)
		if w, err := readInt(filepath.Join(dir, "cpu.weight")); err == nil {
			// The runtimes' shares→weight mapping, inverted.
			l.CPUShares = uint64(2 + ((w-1)*262142)/9999)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "cpu.max")); err == nil {
			fl := strings.Fields(string(b))
			if len(fl) == 2 {
				if fl[0] != "max" {
					l.CPUQuota, _ = strconv.ParseInt(fl[0], 10, 64)
				}
				l.CPUPeriod, _ = strconv.ParseUint(fl[1], 10, 64)
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
	cpu, mem := f.Dir("cpu", path), f.Dir("memory", path)
	if v, err := readInt(filepath.Join(cpu, "cpu.shares")); err == nil {
		l.CPUShares = uint64(v)
	} else {
		return nil, err
	}
	l.CPUQuota, _ = readInt(filepath.Join(cpu, "cpu.cfs_quota_us"))
	if v, err := readInt(filepath.Join(cpu, "cpu.cfs_period_us")); err == nil {
		l.CPUPeriod = uint64(v)
	}
	if v, err := readInt(filepath.Join(mem, "memory.limit_in_bytes")); err == nil && uint64(v) < unlimitedV1 {
		l.MemoryLimit = v
	}
	if v, err := readInt(filepath.Join(mem, "memory.memsw.limit_in_bytes")); err == nil && uint64(v) < unlimitedV1 && l.MemoryLimit >= 0 {
		l.SwapLimit = v - l.MemoryLimit
	}
	if v, err := readInt(filepath.Join(f.Dir("pids", path), "pids.max")); err == nil {
		l.PidsMax = v
	}
	l.CpusetCpus = readString(filepath.Join(f.Dir("cpuset", path), "cpuset.cpus"))
	return l, nil
}

func readString(p string) string {
	b, _ := os.ReadFile(p)
	return strings.TrimSpace(string(b))
}

func readUint(p string) (uint64, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", p, err)
	}
	return v, nil
}

// readLimit reads a limit file; max is true for v2's "max".
func readLimit(p string) (v uint64, max bool, err error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, false, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, true, nil
	}
	v, err = strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%s: %w", p, err)
	}
	return v, false, nil
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

// readKV reads a flat keyed file ("key value" lines: memory.stat, cpu.stat, memory.events).
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
		if n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, sc.Err()
}
