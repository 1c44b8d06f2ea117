package eviction

import (
	"context"
	"testing"

	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestSummaryStatsByPodUID(t *testing.T) {
	u := func(v uint64) *uint64 { return &v }
	ctr := func(name string, mem, rootfs, logs uint64) statsapi.ContainerStats {
		return statsapi.ContainerStats{Name: name, Memory: &statsapi.MemoryStats{WorkingSetBytes: u(mem)},
			Rootfs: &statsapi.FsStats{UsedBytes: u(rootfs)}, Logs: &statsapi.FsStats{UsedBytes: u(logs)}}
	}
	pods := []statsapi.PodStats{
		// The pod's own memory figure includes the sandbox; its ephemeral storage its emptyDirs.
		{PodRef: statsapi.PodReference{UID: "a"}, Memory: &statsapi.MemoryStats{WorkingSetBytes: u(120)},
			EphemeralStorage: &statsapi.FsStats{UsedBytes: u(50)}, ProcessStats: &statsapi.ProcessStats{ProcessCount: u(4)},
			Containers: []statsapi.ContainerStats{ctr("web", 100, 5, 2), ctr("log", 10, 3, 0)}},
		// From container stats only (a runtime without ListPodSandboxStats): the sums.
		{PodRef: statsapi.PodReference{UID: "b"}, Containers: []statsapi.ContainerStats{ctr("x", 50, 1, 1)}},
	}
	got, err := SummaryStats{Pods: func(context.Context) ([]statsapi.PodStats, error) { return pods, nil }}.PodUsage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a, b := got["a"], got["b"]
	if a.Memory != 120 || a.Disk != 50 || a.Processes != 4 || a.Containers["web"].Memory != 100 || a.Containers["web"].Disk != 7 || a.Containers["log"].Disk != 3 {
		t.Errorf("a: %+v", a)
	}
	if b.Memory != 50 || b.Disk != 2 || b.Processes != 0 {
		t.Errorf("b: %+v", b)
	}
}
