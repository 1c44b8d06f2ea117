package engine

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/store"
)

// Stats of gVisor pods. A container's processes live in the Sentry, so its cgroup (runsc makes
// an empty one for tools) says nothing: its figures come from runsc (`runsc events --stats`):
// CPU is the container's own, memory is the Sentry's whole (runsc of this era does not account
// memory per container), so every container of a pod reports the pod's memory. The pod's own
// figures are the host's view of the sandbox: the cgroup holding the Sentry and its gofers,
// which is what the pod costs the node and what its limits bound.

// gvisorStats fills a running gVisor container's CPU and memory from runsc; false when c is not a
// gVisor container (its cgroup is read instead).
func (m *containerManager) gvisorStats(c *store.Container, out *runtimeapi.ContainerStats, now time.Time) bool {
	rt, err := m.runtimeFor(c.Handler)
	if err != nil || !rt.Sandboxed() {
		return false
	}
	gs, err := rt.GvisorStats(context.Background(), c.ID)
	if err != nil {
		m.log.Debug("gVisor container stats", "id", c.ID, "err", err)
		return true
	}
	ts := now.UnixNano()
	out.Cpu.UsageCoreNanoSeconds.Value = gs.CPUUsageNanos
	out.Cpu.UsageNanoCores.Value = m.cpuRate(c.ID, now, gs.CPUUsageNanos)
	out.Memory = &runtimeapi.MemoryUsage{
		Timestamp:       ts,
		WorkingSetBytes: &runtimeapi.UInt64Value{Value: gs.MemoryUsage},
		UsageBytes:      &runtimeapi.UInt64Value{Value: gs.MemoryUsage},
	}
	if gs.MemoryLimit > 0 && gs.MemoryLimit < 1<<62 {
		out.Memory.AvailableBytes = &runtimeapi.UInt64Value{Value: subU64(gs.MemoryLimit, gs.MemoryUsage)}
	}
	return true
}

// gvisorPodStats replaces the sum of a gVisor pod's containers (each of which reports the whole
// Sentry's memory) by the sandbox's cgroup, and counts the Sentry's tasks.
func (s *Engine) gvisorPodStats(sb *store.Sandbox, linux *runtimeapi.LinuxPodSandboxStats, now time.Time) {
	if !sb.Gvisor {
		return
	}
	cpu, mem, err := readCgroup(gvisorSandboxCgroup(sb))
	if err != nil {
		s.log.Debug("gVisor sandbox cgroup stats", "id", sb.ID, "err", err)
		return
	}
	ts := now.UnixNano()
	linux.Cpu = &runtimeapi.CpuUsage{
		Timestamp:            ts,
		UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: cpu},
		UsageNanoCores:       &runtimeapi.UInt64Value{Value: s.ctr.cpuRate(sb.ID, now, cpu)},
	}
	linux.Memory = memoryUsage(ts, mem)
	if rt, err := s.ctr.runtimeFor(sb.Handler); err == nil {
		if gs, err := rt.GvisorStats(context.Background(), sb.ID); err == nil {
			linux.Process = &runtimeapi.ProcessUsage{Timestamp: ts, ProcessCount: &runtimeapi.UInt64Value{Value: gs.Pids}}
		}
	}
}
