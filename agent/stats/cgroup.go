package stats

import (
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/agent/cm"
	"github.com/nodelet/nodelet/internal/cgroupfs"
)

// cgroupPath names one cgroup: the same path in every hierarchy, or (on v1, where a process may
// sit at different places per controller) the paths in the cpuacct and memory hierarchies.
type cgroupPath struct {
	cpu, memory string
}

func samePath(p string) cgroupPath { return cgroupPath{cpu: p, memory: p} }

// cgroupStats reads CPU and memory of one cgroup (paths as in /proc/<pid>/cgroup, e.g.
// "/kubepods"); ok is false when neither could be read.
func cgroupStats(fs cgroupfs.FS, path cgroupPath, now metav1.Time) (*statsapi.CPUStats, *statsapi.MemoryStats, bool) {
	var cpu *statsapi.CPUStats
	if ns, err := fs.CPUUsageNanos(path.cpu); err == nil {
		cpu = &statsapi.CPUStats{Time: now, UsageCoreNanoSeconds: &ns}
	} else if fs.Unified() {
		// One folder holds both: without its cpu.stat the cgroup is not there.
		return nil, nil, false
	}
	m, err := fs.Memory(path.memory)
	if err != nil {
		return cpu, nil, cpu != nil
	}
	usage, ws := m.Usage, m.WorkingSet()
	mem := &statsapi.MemoryStats{Time: now, UsageBytes: &usage, WorkingSetBytes: &ws}
	if !fs.Unified() {
		rss := m.RSS
		mem.RSSBytes = &rss
	}
	// The kubelet's rule: the limit less the working set, and only under a real limit.
	if avail, ok := m.Available(); ok {
		mem.AvailableBytes = &avail
	}
	return cpu, mem, true
}

// ownCgroup is the agent's own cgroup (for the "kubelet" system container), from /proc/self/cgroup.
func ownCgroup(fs cgroupfs.FS, procRoot string) (cgroupPath, bool) {
	b, err := os.ReadFile(filepath.Join(procRoot, "self", "cgroup"))
	if err != nil {
		return cgroupPath{}, false
	}
	p := cgroupfs.ParseProcCgroup(b)
	return cgroupPath{cpu: p.Path(fs, "cpuacct"), memory: p.Path(fs, "memory")}, true
}

// podProcesses counts a pod's tasks from its pod cgroup (pods/<qos>/pod<uid>, the cgroupfs layout
// the agent makes), for runtimes whose stats carry no process count: the eviction manager ranks
// pods by it under PID pressure.
func podProcesses(fs cgroupfs.FS, podsCgroup, uid string) (uint64, bool) {
	if podsCgroup == "" {
		return 0, false
	}
	names := cm.PodCgroups{Root: podsCgroup}
	for _, tier := range cm.QoSTiers {
		if n, err := fs.Pids(names.Pod(tier, uid)); err == nil {
			return n, true
		}
	}
	return 0, false
}
