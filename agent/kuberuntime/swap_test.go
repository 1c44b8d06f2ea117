package kuberuntime

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/cgroupfs"
)

// TestNoSwapPerQoSAndCgroupVersion: the CRI swap figures each kind of container gets, as the
// kubelet's NoSwap sends them: v1 a memory+swap limit equal to the memory limit (none without a
// memory limit), v2 memory.swap.max 0 for every container, nothing where swap is not accounted.
func TestNoSwapPerQoSAndCgroupVersion(t *testing.T) {
	const mi = 1 << 20
	containers := []struct {
		name      string
		resources v1.ResourceRequirements
		qos       v1.PodQOSClass
		limit     int64
	}{
		{"guaranteed", reqs("100m", "100m", "64Mi", "64Mi"), v1.PodQOSGuaranteed, 64 * mi},
		{"burstable with a limit", reqs("100m", "", "32Mi", "64Mi"), v1.PodQOSBurstable, 64 * mi},
		{"burstable, request only", reqs("", "", "32Mi", ""), v1.PodQOSBurstable, 0},
		{"burstable, cpu only", reqs("100m", "", "", ""), v1.PodQOSBurstable, 0},
		{"best effort", reqs("", "", "", ""), v1.PodQOSBestEffort, 0},
	}
	for _, host := range []struct {
		name string
		sw   SwapController
	}{
		{"v1", SwapController{Available: true}},
		{"v2", SwapController{Unified: true, Available: true}},
		{"v1 without swap accounting", SwapController{}},
		{"v2 without swap accounting", SwapController{Unified: true}},
	} {
		for _, tc := range containers {
			t.Run(host.name+"/"+tc.name, func(t *testing.T) {
				pod := testPod(v1.RestartPolicyAlways, nil, "app")
				pod.Spec.Containers[0].Resources = tc.resources
				if got := qosClass(pod); got != tc.qos {
					t.Fatalf("QoS %s, want %s", got, tc.qos)
				}
				r := noSwap(linuxResources(pod, &pod.Spec.Containers[0]), host.sw)
				if r.MemoryLimitInBytes != tc.limit {
					t.Fatalf("memory limit %d, want %d", r.MemoryLimitInBytes, tc.limit)
				}
				wantSwap, wantUnified := int64(0), ""
				switch {
				case !host.sw.Available:
				case host.sw.Unified:
					wantUnified = "0"
				default:
					wantSwap = tc.limit
				}
				if r.MemorySwapLimitInBytes != wantSwap {
					t.Errorf("memory_swap_limit_in_bytes %d, want %d", r.MemorySwapLimitInBytes, wantSwap)
				}
				if got, ok := r.Unified[cgroup2SwapMax]; got != wantUnified || ok != (wantUnified != "") {
					t.Errorf("unified %v, want memory.swap.max %q", r.Unified, wantUnified)
				}
				if len(r.Unified) > 1 {
					t.Errorf("unified %v: more than memory.swap.max", r.Unified)
				}
			})
		}
	}
}

// TestSwapControllerDetection: where the kubelet looks for swap accounting on each cgroup version.
func TestSwapControllerDetection(t *testing.T) {
	mount := t.TempDir()
	self := filepath.Join(t.TempDir(), "cgroup")
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v1fs, v2fs := cgroupfs.FS{Mount: mount, Version: cgroupfs.V1}, cgroupfs.FS{Mount: mount, Version: cgroupfs.V2}
	if sw := detectSwapController(v1fs, self); sw != (SwapController{}) {
		t.Fatalf("v1 without memsw: %+v", sw)
	}
	write(filepath.Join(mount, "memory", "memory.memsw.limit_in_bytes"), "9223372036854771712\n")
	if sw := detectSwapController(v1fs, self); sw != (SwapController{Available: true}) {
		t.Fatalf("v1 with memsw: %+v", sw)
	}
	write(self, "0::/kubelet.slice\n")
	if sw := detectSwapController(v2fs, self); sw != (SwapController{Unified: true}) {
		t.Fatalf("v2 without memory.swap.max: %+v", sw)
	}
	write(filepath.Join(mount, "kubelet.slice", "memory.swap.max"), "max\n")
	if sw := detectSwapController(v2fs, self); sw != (SwapController{Unified: true, Available: true}) {
		t.Fatalf("v2 with memory.swap.max: %+v", sw)
	}
}

// TestContainerConfigAndResizeCarryNoSwap: both the creation's config and an in-place resize's
// update carry the swap figures, so a resize on v1 moves the memory+swap limit with the memory
// limit (and leaves no swap behind).
func TestContainerConfigAndResizeCarryNoSwap(t *testing.T) {
	sw := hostSwap()
	if !sw.Available {
		t.Fatal("this host's memory cgroups do not account swap: boot with swapaccount=1 on a kernel built with CONFIG_MEMCG_SWAP")
	}
	f := newFixture(t)
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Resources = reqs("", "", "32Mi", "64Mi")
	check := func(what string, got, limit int64, unified map[string]string) {
		t.Helper()
		if sw.Unified {
			if unified[cgroup2SwapMax] != "0" {
				t.Errorf("%s: unified %v, want memory.swap.max 0", what, unified)
			}
		} else if got != limit || limit != 64<<20 {
			t.Errorf("%s: memory+swap %d for memory %d, want both 64 MiB", what, got, limit)
		}
	}
	cfg, err := f.m.generateContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Linux.Resources
	check("create", r.MemorySwapLimitInBytes, r.MemoryLimitInBytes, r.Unified)
	u := f.m.containerLinuxResources(pod, &pod.Spec.Containers[0])
	check("resize", u.MemorySwapLimitInBytes, u.MemoryLimitInBytes, u.Unified)
}
