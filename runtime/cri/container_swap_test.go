package cri_test

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/cgroupfs"
	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// requireSwapAccounting fails (never skips) on a kernel whose memory cgroups do not account swap:
// there no swap limit exists to check.
func requireSwapAccounting(t *testing.T) {
	t.Helper()
	if !cgroupfs.Host().SwapAccounting("/proc/self/cgroup") {
		t.Fatal("the kernel does not account swap in memory cgroups (no memory.memsw.limit_in_bytes / memory.swap.max): " +
			"boot with swapaccount=1 on a kernel built with CONFIG_MEMCG_SWAP")
	}
}

// TestContainerSwapLimit: a memory limit leaves a container no swap beyond it, in the cgroup runc
// and crun made (v1: memory.memsw.limit_in_bytes equal to memory.limit_in_bytes; v2:
// memory.swap.max 0), whether the client sent the swap limit (the kubelet's NoSwap) or not; an
// update that raises the memory limit alone raises the swap limit with it instead of failing on
// v1's memsw ≥ memory rule; an explicit larger memory+swap limit is kept; nonsense is refused.
func TestContainerSwapLimit(t *testing.T) {
	requireSwapAccounting(t)
	for _, handler := range []string{"runc", "crun"} {
		t.Run(handler, func(t *testing.T) {
			e := runtimetest.Start(t)
			pod := e.PodWithLogs("swap-" + handler)
			sb := e.RunPod(pod, handler)
			limits := func(id string) *cgroupfs.Limits {
				t.Helper()
				l, err := cgroupfs.Host().Limits(cgroupOf(t, e, id))
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			run := func(name string, r *runtimeapi.LinuxContainerResources) string {
				cfg := runtimetest.ContainerConfig(name, "sleep", "1000")
				cfg.Linux.Resources = r
				return e.RunContainer(sb, pod, cfg)
			}

			defaulted := run("defaulted", &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 64 << 20})
			if l := limits(defaulted); l.MemoryLimit != 64<<20 || l.SwapLimit != 0 {
				t.Fatalf("memory limit alone: memory %d, swap beyond it %d; want 64 MiB and 0", l.MemoryLimit, l.SwapLimit)
			}
			if r := e.Status(defaulted).Resources.GetLinux(); r.GetMemorySwapLimitInBytes() != 64<<20 {
				t.Fatalf("status: memory+swap %d, want the 64 MiB in force", r.GetMemorySwapLimitInBytes())
			}
			noSwap := run("noswap", &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 64 << 20, MemorySwapLimitInBytes: 64 << 20})
			if l := limits(noSwap); l.MemoryLimit != 64<<20 || l.SwapLimit != 0 {
				t.Fatalf("NoSwap: memory %d, swap beyond it %d; want 64 MiB and 0", l.MemoryLimit, l.SwapLimit)
			}
			if _, err := e.Runtime.UpdateContainerResources(e.Ctx(), &runtimeapi.UpdateContainerResourcesRequest{
				ContainerId: noSwap, Linux: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 128 << 20}}); err != nil {
				t.Fatalf("raising the memory limit alone: %v", err)
			}
			if l := limits(noSwap); l.MemoryLimit != 128<<20 || l.SwapLimit != 0 {
				t.Fatalf("after raising: memory %d, swap beyond it %d; want 128 MiB and 0", l.MemoryLimit, l.SwapLimit)
			}
			if r := e.Status(noSwap).Resources.GetLinux(); r.GetMemoryLimitInBytes() != 128<<20 || r.GetMemorySwapLimitInBytes() != 128<<20 {
				t.Fatalf("status after raising: memory %d, memory+swap %d; want both 128 MiB", r.GetMemoryLimitInBytes(), r.GetMemorySwapLimitInBytes())
			}
			if _, err := e.Runtime.UpdateContainerResources(e.Ctx(), &runtimeapi.UpdateContainerResourcesRequest{
				ContainerId: noSwap, Linux: &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 32 << 20, MemorySwapLimitInBytes: 32 << 20}}); err != nil {
				t.Fatalf("lowering both: %v", err)
			}
			if l := limits(noSwap); l.MemoryLimit != 32<<20 || l.SwapLimit != 0 {
				t.Fatalf("after lowering: memory %d, swap beyond it %d; want 32 MiB and 0", l.MemoryLimit, l.SwapLimit)
			}
			some := run("some", &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: 64 << 20, MemorySwapLimitInBytes: 96 << 20})
			if l := limits(some); l.MemoryLimit != 64<<20 || l.SwapLimit != 32<<20 {
				t.Fatalf("memory+swap 96 MiB: memory %d, swap beyond it %d; want 64 MiB and 32 MiB", l.MemoryLimit, l.SwapLimit)
			}

			for name, r := range map[string]*runtimeapi.LinuxContainerResources{
				"swap below memory": {MemoryLimitInBytes: 64 << 20, MemorySwapLimitInBytes: 32 << 20},
				"swap alone":        {MemorySwapLimitInBytes: 64 << 20},
			} {
				cfg := runtimetest.ContainerConfig("bad", "sleep", "1000")
				cfg.Linux.Resources = r
				_, err := e.Runtime.CreateContainer(e.Ctx(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: cfg, SandboxConfig: pod})
				if status.Code(err) != codes.InvalidArgument {
					t.Errorf("%s: %v, want InvalidArgument", name, err)
				}
			}
			if !cgroupfs.Host().Unified() {
				cfg := runtimetest.ContainerConfig("unified", "sleep", "1000")
				cfg.Linux.Resources = &runtimeapi.LinuxContainerResources{Unified: map[string]string{"memory.swap.max": "0"}}
				_, err := e.Runtime.CreateContainer(e.Ctx(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: cfg, SandboxConfig: pod})
				if status.Code(err) != codes.InvalidArgument {
					t.Errorf("cgroup v2 files on a v1 host: %v, want InvalidArgument", err)
				}
			}
		})
	}
}
