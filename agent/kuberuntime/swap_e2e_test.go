package kuberuntime

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/cgroupfs"
	"github.com/nodelet/nodelet/test/harness/crirt"
)

// runOnRealRuntime syncs pod once through the manager against nodelet's runtime and returns its
// one container's ID; the pod is killed and removed at cleanup.
func runOnRealRuntime(t *testing.T, m *Manager, rt *crirt.Runtime, pod *v1.Pod) string {
	t.Helper()
	ctx := context.Background()
	t.Cleanup(func() {
		if st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace); err == nil {
			zero := int64(0)
			m.KillPod(ctx, pod, st, &zero)
			m.RemovePod(ctx, st)
		}
	})
	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SyncPod(ctx, pod, st); err != nil {
		t.Fatalf("sync: %v", err)
	}
	cs, err := rt.RS.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": string(pod.UID)}}})
	if err != nil || len(cs.Containers) != 1 {
		t.Fatalf("running containers: %v %v", cs, err)
	}
	return cs.Containers[0].Id
}

// TestNoSwapOnTheRealRuntime: a container with a memory limit, created by the agent on nodelet's
// runtime, holds no swap beyond it in its cgroup: on v1 memory.memsw.limit_in_bytes equals
// memory.limit_in_bytes, on v2 memory.swap.max is 0.
func TestNoSwapOnTheRealRuntime(t *testing.T) {
	if !hostSwap().Available {
		t.Fatal("this host's memory cgroups do not account swap: boot with swapaccount=1 on a kernel built with CONFIG_MEMCG_SWAP")
	}
	rt := crirt.Start(t, filepath.Join(t.TempDir(), "rt"))
	image := rt.Push(t, "busybox:noswap", nil)
	m := NewManager(Deps{Runtime: rt.RS, Images: rt.IS, RootDir: t.TempDir(), PodLogsDir: t.TempDir()})
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.UID = "uid-e2e-noswap"
	pod.Spec.HostNetwork = true
	c := &pod.Spec.Containers[0]
	c.Image, c.Command = image, []string{"sleep", "3600"}
	c.Resources = reqs("", "", "32Mi", "64Mi")
	id := runOnRealRuntime(t, m, rt, pod)

	resp, err := rt.RS.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		CgroupsPath string `json:"cgroupsPath"`
	}
	if err := json.Unmarshal([]byte(resp.Info["info"]), &info); err != nil || info.CgroupsPath == "" {
		t.Fatalf("verbose info %q: %v", resp.Info["info"], err)
	}
	read := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	fs := cgroupfs.Host()
	dir := fs.Dir("memory", info.CgroupsPath)
	if fs.Unified() {
		if got := read(filepath.Join(dir, "memory.swap.max")); got != "0" {
			t.Fatalf("memory.swap.max %s, want 0", got)
		}
		return
	}
	limit, memsw := read(filepath.Join(dir, "memory.limit_in_bytes")), read(filepath.Join(dir, "memory.memsw.limit_in_bytes"))
	if limit != strconv.Itoa(64<<20) || memsw != limit {
		t.Fatalf("memory.limit_in_bytes %s, memory.memsw.limit_in_bytes %s: want both %d", limit, memsw, 64<<20)
	}
}
