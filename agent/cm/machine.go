package cm

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Machine reads the node's capacity. Its zero value reads this host; the paths are there so tests
// can point it at files of their own.
type Machine struct {
	// Proc and Sys default to /proc and /sys.
	Proc, Sys string
	// CPUs overrides the number of CPUs (0: runtime.NumCPU, the CPUs the agent may run on).
	CPUs int
}

func (m Machine) proc(p string) string { return filepath.Join(or(m.Proc, "/proc"), p) }
func (m Machine) sys(p string) string  { return filepath.Join(or(m.Sys, "/sys"), p) }

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Capacity is the node's capacity as the kubelet reports it: the CPUs, MemTotal, maxPods pods, the
// size of rootDir's filesystem as ephemeral-storage (where emptyDirs and logs live), and
// hugepages-<size> for every page size the kernel offers (pages × size, 0 when none are
// reserved). Internal adds pid, the most processes the kernel allows, which only the cgroups use.
func (m Machine) Capacity(maxPods int, rootDir string) (capacity, internal v1.ResourceList, err error) {
	cpus := m.CPUs
	if cpus == 0 {
		cpus = goruntime.NumCPU()
	}
	capacity = v1.ResourceList{
		v1.ResourceCPU:  *resource.NewQuantity(int64(cpus), resource.DecimalSI),
		v1.ResourcePods: *resource.NewQuantity(int64(maxPods), resource.DecimalSI),
	}
	mem, err := m.memTotal()
	if err != nil {
		return nil, nil, fmt.Errorf("memory capacity: %w", err)
	}
	capacity[v1.ResourceMemory] = *resource.NewQuantity(mem, resource.BinarySI)
	if rootDir != "" {
		size, err := fsSize(rootDir)
		if err != nil {
			return nil, nil, fmt.Errorf("ephemeral-storage capacity of %s: %w", rootDir, err)
		}
		capacity[v1.ResourceEphemeralStorage] = *resource.NewQuantity(size, resource.BinarySI)
	}
	pages, err := m.hugePages()
	if err != nil {
		return nil, nil, fmt.Errorf("huge pages: %w", err)
	}
	for size, total := range pages {
		capacity[v1.ResourceName(v1.ResourceHugePagesPrefix+resource.NewQuantity(size, resource.BinarySI).String())] =
			*resource.NewQuantity(total, resource.BinarySI)
	}
	internal = capacity.DeepCopy()
	if pids, err := m.maxPIDs(); err == nil {
		internal[ResourcePID] = *resource.NewQuantity(pids, resource.DecimalSI)
	}
	return capacity, internal, nil
}

// fsSize is the size of the filesystem dir is on, or will be on once made: the agent is built
// before its root dir exists, so a missing dir is measured at its nearest existing parent.
func fsSize(dir string) (int64, error) {
	dir = filepath.Clean(dir)
	for {
		var st unix.Statfs_t
		err := unix.Statfs(dir, &st)
		if err == nil {
			return int64(st.Blocks) * st.Bsize, nil
		}
		parent := filepath.Dir(dir)
		if err != unix.ENOENT || parent == dir {
			return 0, err
		}
		dir = parent
	}
}

func (m Machine) memTotal() (int64, error) {
	b, err := os.ReadFile(m.proc("meminfo"))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("MemTotal %q: %w", f[1], err)
			}
			return kb * 1024, nil
		}
	}
	return 0, fmt.Errorf("no MemTotal in %s", m.proc("meminfo"))
}

// hugePages maps each page size in bytes to the bytes of pages reserved, from
// /sys/kernel/mm/hugepages/hugepages-<N>kB/nr_hugepages. No folder means no huge pages.
func (m Machine) hugePages() (map[int64]int64, error) {
	dir := m.sys("kernel/mm/hugepages")
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[int64]int64{}
	for _, e := range ents {
		kb, ok := strings.CutPrefix(e.Name(), "hugepages-")
		if !ok {
			continue
		}
		kb, ok = strings.CutSuffix(kb, "kB")
		if !ok {
			continue
		}
		size, err := strconv.ParseInt(kb, 10, 64)
		if err != nil {
			continue
		}
		n, err := readInt(filepath.Join(dir, e.Name(), "nr_hugepages"))
		if err != nil {
			return nil, err
		}
		out[size*1024] = n * size * 1024
	}
	return out, nil
}

// maxPIDs is the smaller of kernel.pid_max and kernel.threads-max: either bounds the tasks.
func (m Machine) maxPIDs() (int64, error) {
	var least int64
	for _, f := range []string{"sys/kernel/pid_max", "sys/kernel/threads-max"} {
		n, err := readInt(m.proc(f))
		if err != nil {
			return 0, err
		}
		if least == 0 || n < least {
			least = n
		}
	}
	return least, nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

func parseQuantity(s string) (int64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, err
	}
	return q.Value(), nil
}
