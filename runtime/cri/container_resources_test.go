package cri_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/cgroupfs"
	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// cgroupOf reads the container's cgroups path from the verbose status.
func cgroupOf(t *testing.T, e *runtimetest.Env, id string) string {
	t.Helper()
	resp, err := e.Runtime.ContainerStatus(e.Ctx(), &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		CgroupsPath string `json:"cgroupsPath"`
		Pid         int    `json:"pid"`
	}
	if err := json.Unmarshal([]byte(resp.Info["info"]), &info); err != nil || info.CgroupsPath == "" || info.Pid == 0 {
		t.Fatalf("verbose info %q: %v", resp.Info["info"], err)
	}
	return info.CgroupsPath
}

func TestContainerResourcesAndStats(t *testing.T) {
	for _, handler := range []string{"runc", "crun"} {
		t.Run(handler, func(t *testing.T) {
			e := runtimetest.Start(t)
			pod := e.PodWithLogs("res-" + handler)
			sb := e.RunPod(pod, handler)
			cfg := runtimetest.ContainerConfig("limited", "sh", "-c", "dd if=/dev/zero of=/tmp/blob bs=1k count=512 2>/dev/null; echo ready; sleep 1000")
			cfg.Linux.Resources = &runtimeapi.LinuxContainerResources{
				CpuShares: 512, CpuQuota: 50000, CpuPeriod: 100000, MemoryLimitInBytes: 64 << 20, CpusetCpus: "0",
				OomScoreAdj: -999, // more than the daemon may grant: clamped, not a failed create
			}
			id := e.RunContainer(sb, pod, cfg)
			e.WaitLog(e.Status(id).LogPath, "ready")
			cg := cgroupOf(t, e, id)
			l, err := cgroupfs.Host().Limits(cg)
			if err != nil {
				t.Fatal(err)
			}
			if l.CPUShares != 512 || l.CPUQuota != 50000 || l.CPUPeriod != 100000 || l.MemoryLimit != 64<<20 || l.CpusetCpus != "0" {
				t.Fatalf("limits in the cgroup: %+v", l)
			}
			if _, err := e.Runtime.UpdateContainerResources(e.Ctx(), &runtimeapi.UpdateContainerResourcesRequest{
				ContainerId: id, Linux: &runtimeapi.LinuxContainerResources{CpuShares: 256, MemoryLimitInBytes: 128 << 20, CpuPeriod: 100000, CpuQuota: 20000},
			}); err != nil {
				t.Fatal(err)
			}
			if l, err = cgroupfs.Host().Limits(cg); err != nil || l.CPUShares != 256 || l.MemoryLimit != 128<<20 || l.CPUQuota != 20000 {
				t.Fatalf("limits after update: %+v %v", l, err)
			}
			if r := e.Status(id).Resources.GetLinux(); r.GetMemoryLimitInBytes() != 128<<20 {
				t.Fatalf("status resources after update: %v", r)
			}
			// The kubelet's CPU manager sends a cpuset and nothing else: the other limits stay.
			online, err := os.ReadFile("/sys/devices/system/cpu/online")
			if err != nil {
				t.Fatal(err)
			}
			all := strings.TrimSpace(string(online))
			if _, err := e.Runtime.UpdateContainerResources(e.Ctx(), &runtimeapi.UpdateContainerResourcesRequest{
				ContainerId: id, Linux: &runtimeapi.LinuxContainerResources{CpusetCpus: all}}); err != nil {
				t.Fatal(err)
			}
			if l, err = cgroupfs.Host().Limits(cg); err != nil || l.CpusetCpus != all || l.CPUShares != 256 || l.MemoryLimit != 128<<20 {
				t.Fatalf("limits after a cpuset-only update: %+v %v", l, err)
			}
			if r := e.Status(id).Resources.GetLinux(); r.GetCpusetCpus() != all || r.GetMemoryLimitInBytes() != 128<<20 || r.GetCpuShares() != 256 {
				t.Fatalf("status resources after a cpuset-only update: %v", r)
			}

			st, err := e.Runtime.ContainerStats(e.Ctx(), &runtimeapi.ContainerStatsRequest{ContainerId: id})
			if err != nil {
				t.Fatal(err)
			}
			if st.Stats.Memory.WorkingSetBytes.GetValue() == 0 || st.Stats.Cpu.UsageCoreNanoSeconds.GetValue() == 0 {
				t.Fatalf("stats: %v", st.Stats)
			}
			if st.Stats.WritableLayer.UsedBytes.GetValue() < 512<<10 {
				t.Fatalf("writable layer %d bytes, want ≥ 512 KiB", st.Stats.WritableLayer.UsedBytes.GetValue())
			}
			list, err := e.Runtime.ListContainerStats(e.Ctx(), &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{PodSandboxId: sb}})
			if err != nil || len(list.Stats) != 1 {
				t.Fatalf("list stats: %v %v", list, err)
			}
			ps, err := e.Runtime.PodSandboxStats(e.Ctx(), &runtimeapi.PodSandboxStatsRequest{PodSandboxId: sb})
			if err != nil || len(ps.Stats.Linux.Containers) != 1 || ps.Stats.Linux.Memory.WorkingSetBytes.GetValue() == 0 {
				t.Fatalf("pod stats: %v %v", ps, err)
			}
			lps, err := e.Runtime.ListPodSandboxStats(e.Ctx(), &runtimeapi.ListPodSandboxStatsRequest{})
			if err != nil || len(lps.Stats) != 1 {
				t.Fatalf("list pod stats: %v %v", lps, err)
			}
		})
	}
}

func TestContainerOOMKilled(t *testing.T) {
	e := runtimetest.Start(t)
	pod := e.PodWithLogs("oom")
	sb := e.RunPod(pod, "")
	// tail buffers a "line" of /dev/zero that never ends.
	cfg := runtimetest.ContainerConfig("hog", "tail", "/dev/zero")
	cfg.Linux.Resources = &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 16 << 20}
	id := e.RunContainer(sb, pod, cfg)
	st := e.WaitContainerState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
	if st.Reason != "OOMKilled" || st.ExitCode != 137 {
		t.Fatalf("status: reason %q exit %d", st.Reason, st.ExitCode)
	}
}
