package cri_test

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// TestGvisorStats: a gVisor container's figures come from runsc (its CPU, the Sentry's memory),
// the pod's from the cgroup holding the sandbox, its process count from the Sentry.
func TestGvisorStats(t *testing.T) {
	e := runtimetest.Start(t)
	pod := e.PodWithLogs("gvstats")
	sb := e.RunPod(pod, "runsc")
	busy := e.RunContainer(sb, pod, runtimetest.ContainerConfig("busy", "sh", "-c", "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo done; exec sleep 100000"))
	e.RunContainer(sb, pod, runtimetest.ContainerConfig("idle", "sleep", "100000"))
	e.WaitLog(e.Status(busy).LogPath, "done")

	st, err := e.Runtime.ContainerStats(e.Ctx(), &runtimeapi.ContainerStatsRequest{ContainerId: busy})
	if err != nil {
		t.Fatal(err)
	}
	if st.Stats.GetCpu().GetUsageCoreNanoSeconds().GetValue() == 0 || st.Stats.GetMemory().GetWorkingSetBytes().GetValue() == 0 {
		t.Errorf("busy's stats: cpu %v, memory %v", st.Stats.GetCpu(), st.Stats.GetMemory())
	}
	list, err := e.Runtime.ListContainerStats(e.Ctx(), &runtimeapi.ListContainerStatsRequest{})
	if err != nil || len(list.Stats) != 2 {
		t.Fatalf("list stats: %v, %v", list, err)
	}
	ps, err := e.Runtime.PodSandboxStats(e.Ctx(), &runtimeapi.PodSandboxStatsRequest{PodSandboxId: sb})
	if err != nil {
		t.Fatal(err)
	}
	l := ps.Stats.GetLinux()
	// The pod's CPU is the Sentry's and gofers': at least what its containers used.
	var ctrCPU uint64
	for _, c := range l.GetContainers() {
		ctrCPU += c.GetCpu().GetUsageCoreNanoSeconds().GetValue()
	}
	if l.GetCpu().GetUsageCoreNanoSeconds().GetValue() < ctrCPU || l.GetMemory().GetWorkingSetBytes().GetValue() == 0 ||
		l.GetProcess().GetProcessCount().GetValue() < 3 || len(l.GetContainers()) != 2 {
		t.Errorf("pod stats: cpu %v (containers %d), memory %v, processes %v, %d containers",
			l.GetCpu(), ctrCPU, l.GetMemory(), l.GetProcess(), len(l.GetContainers()))
	}
}
