package oci

import (
	"fmt"
	"sort"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/cgroupfs"
	"github.com/nodelet/nodelet/internal/lazy"
	"github.com/nodelet/nodelet/runtime/errdefs"
)

// host is what the cgroups of this machine can hold, as ApplyResources needs to know it.
type host struct {
	unified        bool // cgroup v2
	swapAccounting bool // the memory controller bounds swap (memory.memsw.* on v1, memory.swap.* on v2)
}

func thisHost() host {
	return hostCgroups.Get()
}

// hostCgroups is read once: neither the cgroup version nor swap accounting changes without a reboot.
var hostCgroups = lazy.Value[host]{New: func() host {
	fs := cgroupfs.Host()
	return host{unified: fs.Unified(), swapAccounting: fs.SwapAccounting("/proc/self/cgroup")}
}}

// applyMemory sets the memory limit and the memory+swap limit (CRI memory_swap_limit_in_bytes,
// OCI memory.swap: both count memory and swap together; -1 is unbounded).
//
// A memory limit sent without a swap limit gets one equal to it where the kernel accounts swap, as
// containerd and CRI-O do: a container gets no swap unless asked (runc writes memsw on v1, and
// memory.swap.max 0 on v2, from it). It also keeps an update that raises the memory limit from
// failing on v1, where memory.limit_in_bytes may never exceed memory.memsw.limit_in_bytes.
func applyMemory(r *specs.LinuxResources, res *runtimeapi.LinuxContainerResources, h host) error {
	limit, swap := res.GetMemoryLimitInBytes(), res.GetMemorySwapLimitInBytes()
	switch {
	case swap < -1:
		return fmt.Errorf("memory_swap_limit_in_bytes %d: %w", swap, errdefs.ErrInvalidArgument)
	case swap > 0 && limit == 0:
		return fmt.Errorf("memory_swap_limit_in_bytes %d without memory_limit_in_bytes: a limit on memory and swap together needs a memory limit below it: %w",
			swap, errdefs.ErrInvalidArgument)
	case swap > 0 && swap < limit:
		return fmt.Errorf("memory_swap_limit_in_bytes %d is below memory_limit_in_bytes %d (it counts memory and swap together): %w",
			swap, limit, errdefs.ErrInvalidArgument)
	case swap > 0 && !h.swapAccounting:
		return fmt.Errorf("memory_swap_limit_in_bytes %d: this kernel does not account swap in cgroups (no %s), so no swap limit can be enforced: %w",
			swap, swapFile(h), errdefs.ErrFailedPrecondition)
	}
	if limit == 0 && swap == 0 {
		return nil
	}
	if r.Memory == nil {
		r.Memory = &specs.LinuxMemory{}
	}
	if limit != 0 {
		r.Memory.Limit = &limit
	}
	if !h.swapAccounting {
		// Only swap -1 (unbounded) gets here: without accounting, swap is unbounded anyway.
		return nil
	}
	switch {
	case swap != 0:
		r.Memory.Swap = &swap
	case limit != 0:
		r.Memory.Swap = &limit
	}
	return nil
}

func swapFile(h host) string {
	if h.unified {
		return "memory.swap.max"
	}
	return "memory.memsw.limit_in_bytes"
}

// applyUnified sets cgroup v2 files by name (the kubelet sends memory.swap.max, memory.min and
// memory.high this way). A v1 host has none of them: they are refused rather than dropped.
func applyUnified(r *specs.LinuxResources, res *runtimeapi.LinuxContainerResources, h host) error {
	u := res.GetUnified()
	if len(u) == 0 {
		return nil
	}
	if !h.unified {
		keys := make([]string, 0, len(u))
		for k := range u {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return fmt.Errorf("unified %s: cgroup v2 files on a cgroup v1 host: %w", strings.Join(keys, ", "), errdefs.ErrInvalidArgument)
	}
	for k := range u {
		if strings.ContainsAny(k, "/\x00") || strings.Contains(k, "..") {
			return fmt.Errorf("unified resource %q: %w", k, errdefs.ErrInvalidArgument)
		}
	}
	r.Unified = map[string]string{}
	for k, v := range u {
		r.Unified[k] = v
	}
	return nil
}

// InForce is res as the container holds it once applied (r): with the memory+swap limit the
// runtime chose where the client sent none, so a status does not report a swap limit that is gone.
func InForce(res *runtimeapi.LinuxContainerResources, r *specs.LinuxResources) *runtimeapi.LinuxContainerResources {
	if res == nil || r == nil || r.Memory == nil || r.Memory.Swap == nil || res.GetMemorySwapLimitInBytes() == *r.Memory.Swap {
		return res
	}
	out := proto.Clone(res).(*runtimeapi.LinuxContainerResources)
	out.MemorySwapLimitInBytes = *r.Memory.Swap
	return out
}
