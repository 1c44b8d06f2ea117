package cadvisor

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/internal/cgroupfs"
)

// manyPods is a runtime of n ready pods with two containers each.
type manyPods struct{ n int }

func (m manyPods) ListContainers(context.Context, *runtimeapi.ListContainersRequest, ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	r := &runtimeapi.ListContainersResponse{}
	for i := range m.n {
		for j := range 2 {
			r.Containers = append(r.Containers, &runtimeapi.Container{Id: fmt.Sprintf("ctr%04d%d", i, j), PodSandboxId: fmt.Sprintf("sb%04d", i),
				Metadata: &runtimeapi.ContainerMetadata{Name: fmt.Sprintf("c%d", j)}, Image: &runtimeapi.ImageSpec{Image: "img"},
				Labels: map[string]string{kubecontainer.LabelPodName: fmt.Sprintf("p%d", i), kubecontainer.LabelPodNamespace: "ns"}})
		}
	}
	return r, nil
}

func (m manyPods) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest, ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	r := &runtimeapi.ListPodSandboxResponse{}
	for i := range m.n {
		r.Items = append(r.Items, &runtimeapi.PodSandbox{Id: fmt.Sprintf("sb%04d", i), State: runtimeapi.PodSandboxState_SANDBOX_READY,
			Metadata: &runtimeapi.PodSandboxMetadata{Name: fmt.Sprintf("p%d", i), Namespace: "ns", Uid: fmt.Sprintf("uid-%04d", i)}})
	}
	return r, nil
}

func (manyPods) ListPodSandboxStats(context.Context, *runtimeapi.ListPodSandboxStatsRequest, ...grpc.CallOption) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	return &runtimeapi.ListPodSandboxStatsResponse{}, nil
}

// BenchmarkCollect110Pods is one scrape of /metrics/cadvisor at the kubelet's default pod limit
// (cgroup files on a tmpfs-like folder: the kernel's cost of real cgroup files is not in it).
func BenchmarkCollect110Pods(b *testing.B) {
	root := b.TempDir()
	files := map[string]string{"cgroup.controllers": "cpu memory pids\n"}
	cg := func(p string) {
		files[p+"/cpu.stat"] = "usage_usec 1\nuser_usec 1\nsystem_usec 1\n"
		files[p+"/memory.current"] = "1\n"
		files[p+"/memory.stat"] = "anon 1\nfile 1\ninactive_file 1\n"
		files[p+"/pids.current"] = "1\n"
		files[p+"/cpu.weight"] = "100\n"
		files[p+"/memory.max"] = "max\n"
	}
	for i := range 110 {
		pod := fmt.Sprintf("kubepods/burstable/poduid-%04d", i)
		cg(pod)
		for j := range 2 {
			cg(fmt.Sprintf("%s/ctr%04d%d", pod, i, j))
		}
	}
	writeTree(b, root, files)
	c := New(Config{FS: cgroupfs.FS{Mount: root, Version: cgroupfs.V2}, PodsCgroup: "/kubepods", Runtime: manyPods{110}})
	r := NewRegistry(c)
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
