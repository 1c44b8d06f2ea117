package cgroupfs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// unlimitedV1 is where v1 memory limits start to mean "none": the kernel's default is the largest
// int64 rounded down to a page, and the kubelet and cAdvisor treat anything from 1<<62 up the same.
const unlimitedV1 = uint64(1) << 62

// Memory is one reading of a cgroup's memory controller.
type Memory struct {
	Usage uint64 // v1 memory.usage_in_bytes, v2 memory.current: page cache included
	Limit uint64 // meaningful only when !Unlimited
	// InactiveFile is the page cache the kernel reclaims first (v1 total_inactive_file, v2
	// inactive_file); 0 when memory.stat does not have it.
	InactiveFile uint64
	RSS          uint64 // v1 total_rss, v2 anon
	PgFault      uint64
	PgMajFault   uint64
	Cache        uint64 // page cache: v1 total_cache, v2 file
	MappedFile   uint64 // v1 total_mapped_file, v2 file_mapped
	// HasStat: memory.stat was read, so the figures from it are measured rather than 0.
	HasStat bool
	// Unlimited: no limit (v2 "max", a v1 value from 1<<62 up, or no limit file).
	Unlimited bool
}

// WorkingSet is usage less the inactive file cache, never below 0: what the kubelet and cAdvisor
// call the working set (cAdvisor's setMemoryStats), the figure eviction and the summary use.
func (m Memory) WorkingSet() uint64 {
	return m.Usage - min(m.InactiveFile, m.Usage)
}

// Available is the limit less the working set, as the kubelet's summary gives AvailableBytes;
// ok is false without a limit (a limit of 0 is none, as cAdvisor reads it). Never below 0.
func (m Memory) Available() (uint64, bool) {
	if m.Unlimited || m.Limit == 0 {
		return 0, false
	}
	ws := m.WorkingSet()
	return m.Limit - min(ws, m.Limit), true
}

// memoryFiles are the names of one version's memory files and memory.stat keys.
type memoryFiles struct {
	usage, limit                   string
	inactive, rss, fault, majFault string
	cache, mapped                  string
}

var (
	memoryV1 = memoryFiles{"memory.usage_in_bytes", "memory.limit_in_bytes", "total_inactive_file", "total_rss", "total_pgfault",
		"total_pgmajfault", "total_cache", "total_mapped_file"}
	memoryV2 = memoryFiles{"memory.current", "memory.max", "inactive_file", "anon", "pgfault", "pgmajfault", "file", "file_mapped"}
)

func (f FS) memoryFiles() memoryFiles {
	if f.Unified() {
		return memoryV2
	}
	return memoryV1
}

// Memory reads the cgroup's memory controller. It fails only when the usage cannot be read (no
// such cgroup, or no memory controller); a missing memory.stat leaves its figures 0.
func (f FS) Memory(path string) (Memory, error) {
	dir, names := f.Dir("memory", path), f.memoryFiles()
	usage, err := readUint(filepath.Join(dir, names.usage))
	if err != nil {
		return Memory{}, fmt.Errorf("cgroup %s: %w", path, err)
	}
	m := Memory{Usage: usage, Unlimited: true}
	if v, max, err := readLimit(filepath.Join(dir, names.limit)); err == nil && !max && v < unlimitedV1 {
		m.Limit, m.Unlimited = v, false
	}
	stat, err := readKV(filepath.Join(dir, "memory.stat"))
	m.fill(stat, names)
	m.HasStat = err == nil
	return m, nil
}

func (m *Memory) fill(stat map[string]uint64, names memoryFiles) {
	m.InactiveFile = stat[names.inactive]
	m.RSS = stat[names.rss]
	m.PgFault = stat[names.fault]
	m.PgMajFault = stat[names.majFault]
	m.Cache = stat[names.cache]
	m.MappedFile = stat[names.mapped]
}

// RootMemory is the whole machine's memory as the root cgroup sees it, with the machine's
// memory (MemTotal of meminfo, a /proc/meminfo) as its limit, as cAdvisor gives the root
// container. v1 reads the root memory cgroup. The v2 root has no memory.current: its usage is
// the root memory.stat's anon + file, as opencontainers/cgroups (the kubelet's cAdvisor reads the
// root through it) counts it, the same pages v1's usage_in_bytes counts.
func (f FS) RootMemory(meminfo string) (Memory, error) {
	total, err := readMemTotal(meminfo)
	if err != nil {
		return Memory{}, err
	}
	names := f.memoryFiles()
	dir := f.Dir("memory", "/")
	m := Memory{Limit: total}
	if !f.Unified() {
		if m.Usage, err = readUint(filepath.Join(dir, names.usage)); err != nil {
			return Memory{}, err
		}
	}
	stat, err := readKV(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return Memory{}, err
	}
	if f.Unified() {
		m.Usage = stat["anon"] + stat["file"]
	}
	m.fill(stat, names)
	m.HasStat = true
	return m, nil
}

// readMemTotal reads MemTotal, in bytes.
func readMemTotal(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "MemTotal:" {
			continue
		}
		v, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: MemTotal: %w", path, err)
		}
		return v * 1024, nil
	}
	return 0, errors.New(path + ": no MemTotal")
}
