package eviction

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type fakeLister struct {
	resp *runtimeapi.ListPodSandboxStatsResponse
}

func (f fakeLister) ListPodSandboxStats(context.Context, *runtimeapi.ListPodSandboxStatsRequest, ...grpc.CallOption) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	return f.resp, nil
}

func TestCRIStatsSumsSandboxesAndContainersByPodUID(t *testing.T) {
	u := func(v uint64) *runtimeapi.UInt64Value { return &runtimeapi.UInt64Value{Value: v} }
	ctr := func(name string, mem, disk uint64) *runtimeapi.ContainerStats {
		return &runtimeapi.ContainerStats{Attributes: &runtimeapi.ContainerAttributes{Metadata: &runtimeapi.ContainerMetadata{Name: name}},
			Memory: &runtimeapi.MemoryUsage{WorkingSetBytes: u(mem)}, WritableLayer: &runtimeapi.FilesystemUsage{UsedBytes: u(disk)}}
	}
	sandbox := func(uid string, mem, procs uint64, cs ...*runtimeapi.ContainerStats) *runtimeapi.PodSandboxStats {
		return &runtimeapi.PodSandboxStats{
			Attributes: &runtimeapi.PodSandboxAttributes{Metadata: &runtimeapi.PodSandboxMetadata{Uid: uid}},
			Linux: &runtimeapi.LinuxPodSandboxStats{Memory: &runtimeapi.MemoryUsage{WorkingSetBytes: u(mem)},
				Process: &runtimeapi.ProcessUsage{ProcessCount: u(procs)}, Containers: cs}}
	}
	got, err := CRIStats{Runtime: fakeLister{&runtimeapi.ListPodSandboxStatsResponse{Stats: []*runtimeapi.PodSandboxStats{
		sandbox("a", 120, 4, ctr("web", 100, 7), ctr("log", 10, 3)),
		sandbox("a", 0, 0), // the dead sandbox of an earlier attempt
		sandbox("b", 0, 1, ctr("x", 50, 0)),
	}}}}.PodUsage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a, b := got["a"], got["b"]
	if a.Memory != 120 || a.Disk != 10 || a.Processes != 4 || a.Containers["web"].Memory != 100 || a.Containers["log"].Disk != 3 {
		t.Errorf("a: %+v", a)
	}
	if b.Memory != 50 || b.Processes != 1 {
		t.Errorf("b (no sandbox memory figure): %+v", b)
	}
}
