package stats

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// cgroupPath names one cgroup: the same path in every hierarchy, or (on v1, where a process may
// sit at different places per controller) a path per controller.
type cgroupPath struct {
	unified, cpu, memory string
}

func samePath(p string) cgroupPath { return cgroupPath{unified: p, cpu: p, memory: p} }

// cgroupStats reads CPU and memory of one cgroup (paths as in /proc/<pid>/cgroup, e.g.
// "/kubepods") under mount (normally /sys/fs/cgroup), on a cgroup v2 host or on v1 controllers.
func cgroupStats(mount string, path cgroupPath, now metav1.Time) (*statsapi.CPUStats, *statsapi.MemoryStats, bool) {
	if _, err := os.Stat(filepath.Join(mount, "cgroup.controllers")); err == nil {
		return cgroupV2(filepath.Join(mount, path.unified), now)
	}
	return cgroupV1(mount, path, now)
}

func cgroupV2(dir string, now metav1.Time) (*statsapi.CPUStats, *statsapi.MemoryStats, bool) {
	cpuStat := readKV(filepath.Join(dir, "cpu.stat"))
	usec, ok := cpuStat["usage_usec"]
	if !ok {
		return nil, nil, false
	}
	ns := usec * 1000
	cpu := &statsapi.CPUStats{Time: now, UsageCoreNanoSeconds: &ns}
	cur, err := readUint(filepath.Join(dir, "memory.current"))
	if err != nil {
		return cpu, nil, true
	}
	mem := memoryFrom(cur, readKV(filepath.Join(dir, "memory.stat"))["inactive_file"], now)
	if max, err := readUint(filepath.Join(dir, "memory.max")); err == nil && max > cur {
		avail := max - cur
		mem.AvailableBytes = &avail
	}
	return cpu, mem, true
}

func cgroupV1(mount string, path cgroupPath, now metav1.Time) (*statsapi.CPUStats, *statsapi.MemoryStats, bool) {
	var cpu *statsapi.CPUStats
	for _, ctrl := range []string{"cpuacct", "cpu,cpuacct"} {
		if ns, err := readUint(filepath.Join(mount, ctrl, path.cpu, "cpuacct.usage")); err == nil {
			cpu = &statsapi.CPUStats{Time: now, UsageCoreNanoSeconds: &ns}
			break
		}
	}
	dir := filepath.Join(mount, "memory", path.memory)
	cur, err := readUint(filepath.Join(dir, "memory.usage_in_bytes"))
	if err != nil {
		return cpu, nil, cpu != nil
	}
	stat := readKV(filepath.Join(dir, "memory.stat"))
	mem := memoryFrom(cur, stat["total_inactive_file"], now)
	if rss, ok := stat["total_rss"]; ok {
		mem.RSSBytes = &rss
	}
	// v1 reports "no limit" as a huge number; only a real limit gives an available figure.
	if limit, err := readUint(filepath.Join(dir, "memory.limit_in_bytes")); err == nil && limit < 1<<62 && limit > cur {
		avail := limit - cur
		mem.AvailableBytes = &avail
	}
	return cpu, mem, true
}

// memoryFrom follows the kubelet: the working set is usage less inactive file cache.
func memoryFrom(usage, inactiveFile uint64, now metav1.Time) *statsapi.MemoryStats {
	ws := usage - min(inactiveFile, usage)
	return &statsapi.MemoryStats{Time: now, UsageBytes: &usage, WorkingSetBytes: &ws}
}

func readUint(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
}

func readKV(path string) map[string]uint64 {
	out := map[string]uint64{}
	f, err := os.Open(path)
	if err != nil {
		return out
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			out[k] = n
		}
	}
	return out
}

// ownCgroup is the agent's own cgroup (for the "kubelet" system container), from /proc/self/cgroup.
func ownCgroup(procRoot string) (cgroupPath, bool) {
	b, err := os.ReadFile(filepath.Join(procRoot, "self", "cgroup"))
	if err != nil {
		return cgroupPath{}, false
	}
	var p cgroupPath
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		ctrls := "," + parts[1] + ","
		switch {
		case parts[0] == "0" && parts[1] == "":
			p.unified = parts[2]
		case strings.Contains(ctrls, ",memory,"):
			p.memory = parts[2]
		case strings.Contains(ctrls, ",cpuacct,"):
			p.cpu = parts[2]
		}
	}
	return p, true
}

// podProcesses counts a pod's tasks from its pod cgroup (pods/<qos>/pod<uid>, the cgroupfs layout
// the agent makes), for runtimes whose stats carry no process count: the eviction manager ranks
// pods by it under PID pressure.
func podProcesses(mount, podsCgroup, uid string) (uint64, bool) {
	if podsCgroup == "" {
		return 0, false
	}
	dirs := []string{filepath.Join(mount, "pids", podsCgroup)}
	if _, err := os.Stat(filepath.Join(mount, "cgroup.controllers")); err == nil {
		dirs = []string{filepath.Join(mount, podsCgroup)}
	}
	for _, d := range dirs {
		for _, qos := range []string{"", "burstable", "besteffort"} {
			if n, err := readUint(filepath.Join(d, qos, "pod"+uid, "pids.current")); err == nil {
				return n, true
			}
		}
	}
	return 0, false
}
