package engine

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/cgroupfs"
	"github.com/nodelet/nodelet/runtime/store"
)

type cpuSample struct {
	at    time.Time
	usage uint64
}

// ContainerStats reads a container's usage.
func (s *Engine) ContainerStats(id string) (*runtimeapi.ContainerStats, error) {
	c, err := s.containers.Get(id)
	if err != nil {
		return nil, fmt.Errorf("container %q: %w", id, err)
	}
	return s.ctr.stats(c), nil
}

// ListContainerStats reads the usage of the running containers f lets through.
func (s *Engine) ListContainerStats(f *runtimeapi.ContainerStatsFilter) []*runtimeapi.ContainerStats {
	var out []*runtimeapi.ContainerStats
	for _, c := range s.containers.List() {
		if f.GetId() != "" && !strings.HasPrefix(c.ID, f.GetId()) ||
			f.GetPodSandboxId() != "" && !strings.HasPrefix(c.SandboxID, f.GetPodSandboxId()) ||
			!ctrLabelsMatch(c.Config.GetLabels(), f.GetLabelSelector()) {
			continue
		}
		if c.Snapshot().State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		out = append(out, s.ctr.stats(c))
	}
	return out
}

func ctrLabelsMatch(labels, sel map[string]string) bool {
	for k, v := range sel {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// stats reads the container's cgroup; a container without one (not running) gets its
// attributes and zero usage.
func (m *containerManager) stats(c *store.Container) *runtimeapi.ContainerStats {
	now := time.Now()
	ts := now.UnixNano()
	out := &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{
			Id: c.ID, Metadata: c.Config.GetMetadata(), Labels: c.Config.GetLabels(), Annotations: c.Config.GetAnnotations(),
		},
		Cpu:    &runtimeapi.CpuUsage{Timestamp: ts, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{}, UsageNanoCores: &runtimeapi.UInt64Value{}},
		Memory: &runtimeapi.MemoryUsage{Timestamp: ts, WorkingSetBytes: &runtimeapi.UInt64Value{}},
	}
	if st := c.Snapshot(); st.State == runtimeapi.ContainerState_CONTAINER_RUNNING && !m.gvisorStats(c, out, now) {
		if cpu, mem, err := readCgroup(c.CgroupPath); err == nil {
			out.Cpu.UsageCoreNanoSeconds.Value = cpu
			out.Cpu.UsageNanoCores.Value = m.cpuRate(c.ID, now, cpu)
			out.Memory = memoryUsage(ts, mem)
		}
	}
	used, inodes, mp := writableLayerUsage(c.Rootfs, c.UpperDir)
	out.WritableLayer = &runtimeapi.FilesystemUsage{
		Timestamp:  ts,
		FsId:       &runtimeapi.FilesystemIdentifier{Mountpoint: mp},
		UsedBytes:  &runtimeapi.UInt64Value{Value: used},
		InodesUsed: &runtimeapi.UInt64Value{Value: inodes},
	}
	return out
}

// readCgroup samples a container's cgroup: it fails when the CPU usage cannot be read (the cgroup
// is gone); memory the cgroup does not account reads as zero.
func readCgroup(path string) (cpuNanos uint64, mem cgroupfs.Memory, err error) {
	fs := cgroupfs.Host()
	if cpuNanos, err = fs.CPUUsageNanos(path); err != nil {
		return 0, cgroupfs.Memory{}, err
	}
	mem, _ = fs.Memory(path)
	return cpuNanos, mem, nil
}

// memoryUsage is a cgroup's memory as CRI reports it; available only under a limit.
func memoryUsage(ts int64, mem cgroupfs.Memory) *runtimeapi.MemoryUsage {
	m := &runtimeapi.MemoryUsage{
		Timestamp:       ts,
		WorkingSetBytes: &runtimeapi.UInt64Value{Value: mem.WorkingSet()},
		UsageBytes:      &runtimeapi.UInt64Value{Value: mem.Usage},
		RssBytes:        &runtimeapi.UInt64Value{Value: mem.RSS},
		PageFaults:      &runtimeapi.UInt64Value{Value: mem.PgFault},
		MajorPageFaults: &runtimeapi.UInt64Value{Value: mem.PgMajFault},
	}
	if avail, ok := mem.Available(); ok {
		m.AvailableBytes = &runtimeapi.UInt64Value{Value: avail}
	}
	return m
}

func subU64(a, b uint64) uint64 {
	if b > a {
		return 0
	}
	return a - b
}

// cpuRate turns two cumulative readings into nanocores, as the kubelet's summary API reports.
func (m *containerManager) cpuRate(id string, now time.Time, usage uint64) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	prev, ok := m.cpu[id]
	m.cpu[id] = cpuSample{at: now, usage: usage}
	if !ok || usage < prev.usage || !now.After(prev.at) {
		return 0
	}
	return uint64(float64(usage-prev.usage) / now.Sub(prev.at).Seconds())
}

// writableLayerUsage measures what the container wrote: upper, the writable layer the image store
// named at create; else (older records) the overlay's upper dir read from the mount table when the
// rootfs is an overlay mount, else the rootfs dir itself. The mount table is the last resort: it
// holds every container's overlay, so reading it per container made a stats call over N pods cost
// N² lines of mountinfo (most of an idle node's CPU with 250 pods).
func writableLayerUsage(rootfs, upper string) (bytes, inodes uint64, mountpoint string) {
	dir := rootfs
	if upper != "" {
		dir = upper
	} else if ms, err := mountinfo.GetMounts(mountinfo.SingleEntryFilter(rootfs)); err == nil && len(ms) > 0 && ms[0].FSType == "overlay" {
		for _, o := range strings.Split(ms[0].VFSOptions, ",") {
			if v, ok := strings.CutPrefix(o, "upperdir="); ok {
				dir = resolveUpper(rootfs, v)
			}
		}
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		inodes++
		if info, err := d.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				bytes += uint64(st.Blocks) * 512
			}
		}
		return nil
	})
	return bytes, inodes, dir
}

// resolveUpper finds an overlay's upper dir. A store that mounts with paths relative to its
// root (to fit many layers in one page of options) leaves them relative in mountinfo too; the
// root is then one of the rootfs's ancestors.
func resolveUpper(rootfs, upper string) string {
	if filepath.IsAbs(upper) {
		return upper
	}
	for d := filepath.Dir(rootfs); d != "/" && d != "."; d = filepath.Dir(d) {
		if st, err := os.Stat(filepath.Join(d, upper)); err == nil && st.IsDir() {
			return filepath.Join(d, upper)
		}
	}
	return rootfs
}

// SandboxStats reads a sandbox's usage.
func (s *Engine) SandboxStats(id string) (*runtimeapi.PodSandboxStats, error) {
	sb, err := s.sandboxes.Get(id)
	if err != nil {
		return nil, fmt.Errorf("sandbox %q: %w", id, err)
	}
	return s.sandboxStats(sb), nil
}

// ListSandboxStats reads the usage of the ready sandboxes f lets through.
func (s *Engine) ListSandboxStats(f *runtimeapi.PodSandboxStatsFilter) []*runtimeapi.PodSandboxStats {
	var out []*runtimeapi.PodSandboxStats
	for _, sb := range s.sandboxes.List() {
		if f.GetId() != "" && !strings.HasPrefix(sb.ID, f.GetId()) || !ctrLabelsMatch(sb.Config.GetLabels(), f.GetLabelSelector()) {
			continue
		}
		if sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		out = append(out, s.sandboxStats(sb))
	}
	return out
}

// sandboxStats sums the pod's containers: the pod's cgroup parent may be shared (the runtime's
// default parent), so it cannot be read as the pod's alone.
func (s *Engine) sandboxStats(sb *store.Sandbox) *runtimeapi.PodSandboxStats {
	ts := time.Now().UnixNano()
	linux := &runtimeapi.LinuxPodSandboxStats{
		Cpu:    &runtimeapi.CpuUsage{Timestamp: ts, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{}, UsageNanoCores: &runtimeapi.UInt64Value{}},
		Memory: &runtimeapi.MemoryUsage{Timestamp: ts, WorkingSetBytes: &runtimeapi.UInt64Value{}, UsageBytes: &runtimeapi.UInt64Value{}, RssBytes: &runtimeapi.UInt64Value{}},
	}
	var procs uint64
	netPid := 0
	for _, c := range s.containers.List() {
		if c.SandboxID != sb.ID || c.Snapshot().State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			continue
		}
		cs := s.ctr.stats(c)
		linux.Containers = append(linux.Containers, cs)
		linux.Cpu.UsageCoreNanoSeconds.Value += cs.GetCpu().GetUsageCoreNanoSeconds().GetValue()
		linux.Cpu.UsageNanoCores.Value += cs.GetCpu().GetUsageNanoCores().GetValue()
		linux.Memory.WorkingSetBytes.Value += cs.GetMemory().GetWorkingSetBytes().GetValue()
		linux.Memory.UsageBytes.Value += cs.GetMemory().GetUsageBytes().GetValue()
		linux.Memory.RssBytes.Value += cs.GetMemory().GetRssBytes().GetValue()
		if n, err := cgroupfs.Host().Pids(c.CgroupPath); err == nil {
			procs += n
		}
		if p := c.Snapshot().Pid; p > 0 && netPid == 0 {
			netPid = p
		}
	}
	if sb.InfraPID > 0 {
		netPid = sb.InfraPID
	}
	if netPid > 0 && sb.NetNSPath != "" {
		linux.Network = networkUsage(netPid, ts)
	}
	linux.Process = &runtimeapi.ProcessUsage{Timestamp: ts, ProcessCount: &runtimeapi.UInt64Value{Value: procs}}
	s.gvisorPodStats(sb, linux, time.Unix(0, ts))
	md := sb.Config.GetMetadata()
	return &runtimeapi.PodSandboxStats{
		Attributes: &runtimeapi.PodSandboxAttributes{Id: sb.ID, Metadata: md, Labels: sb.Config.GetLabels(), Annotations: sb.Config.GetAnnotations()},
		Linux:      linux,
	}
}

// networkUsage reads the pod's interfaces through a process in its network namespace
// (/proc/<pid>/net/dev shows the namespace of that process).
func networkUsage(pid int, ts int64) *runtimeapi.NetworkUsage {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/net/dev")
	if err != nil {
		return nil
	}
	nu := &runtimeapi.NetworkUsage{Timestamp: ts}
	for _, line := range strings.Split(string(data), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		name = strings.TrimSpace(name)
		f := strings.Fields(rest)
		if name == "lo" || len(f) < 16 {
			continue
		}
		n := func(i int) *runtimeapi.UInt64Value {
			v, _ := strconv.ParseUint(f[i], 10, 64)
			return &runtimeapi.UInt64Value{Value: v}
		}
		iface := &runtimeapi.NetworkInterfaceUsage{Name: name, RxBytes: n(0), RxErrors: n(2), TxBytes: n(8), TxErrors: n(10)}
		nu.Interfaces = append(nu.Interfaces, iface)
		if nu.DefaultInterface == nil || name == "eth0" {
			nu.DefaultInterface = iface
		}
	}
	if nu.DefaultInterface == nil {
		return nil // loopback only: nothing the kubelet's summary counts
	}
	return nu
}
