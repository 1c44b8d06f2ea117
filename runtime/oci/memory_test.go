package oci

import (
	"errors"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// TestApplyMemorySwap: the OCI memory block a CRI request becomes, on hosts with and without swap
// accounting. A memory limit alone gets no swap beyond it (containerd's and CRI-O's default); an
// explicit memory+swap limit is kept; what cannot be enforced or makes no sense is refused.
func TestApplyMemorySwap(t *testing.T) {
	const mi = 1 << 20
	v1 := host{swapAccounting: true}
	v2 := host{unified: true, swapAccounting: true}
	noAccounting := host{}
	for _, tc := range []struct {
		name        string
		limit, swap int64
		host        host
		wantLimit   int64 // 0: none
		wantSwap    int64 // 0: none
		err         error
	}{
		{name: "limit only, v1", limit: 64 * mi, host: v1, wantLimit: 64 * mi, wantSwap: 64 * mi},
		{name: "limit only, v2", limit: 64 * mi, host: v2, wantLimit: 64 * mi, wantSwap: 64 * mi},
		{name: "the kubelet's NoSwap on v1", limit: 64 * mi, swap: 64 * mi, host: v1, wantLimit: 64 * mi, wantSwap: 64 * mi},
		{name: "some swap", limit: 64 * mi, swap: 96 * mi, host: v1, wantLimit: 64 * mi, wantSwap: 96 * mi},
		{name: "unbounded swap", limit: 64 * mi, swap: -1, host: v1, wantLimit: 64 * mi, wantSwap: -1},
		{name: "unbounded swap, nothing else", swap: -1, host: v1, wantSwap: -1},
		{name: "no limit", host: v1},
		{name: "no accounting: limit only", limit: 64 * mi, host: noAccounting, wantLimit: 64 * mi},
		{name: "no accounting: unbounded swap is what there is", limit: 64 * mi, swap: -1, host: noAccounting, wantLimit: 64 * mi},
		{name: "no accounting: a swap limit cannot be enforced", limit: 64 * mi, swap: 64 * mi, host: noAccounting, err: errdefs.ErrFailedPrecondition},
		{name: "swap below the limit", limit: 64 * mi, swap: 32 * mi, host: v1, err: errdefs.ErrInvalidArgument},
		{name: "swap without a limit", swap: 64 * mi, host: v1, err: errdefs.ErrInvalidArgument},
		{name: "negative swap", limit: 64 * mi, swap: -2, host: v1, err: errdefs.ErrInvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r specs.LinuxResources
			err := applyMemory(&r, &runtimeapi.LinuxContainerResources{MemoryLimitInBytes: tc.limit, MemorySwapLimitInBytes: tc.swap}, tc.host)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var limit, swap int64
			if r.Memory != nil && r.Memory.Limit != nil {
				limit = *r.Memory.Limit
			}
			if r.Memory != nil && r.Memory.Swap != nil {
				swap = *r.Memory.Swap
			}
			if limit != tc.wantLimit || swap != tc.wantSwap {
				t.Fatalf("limit %d swap %d, want %d %d", limit, swap, tc.wantLimit, tc.wantSwap)
			}
		})
	}
}

// TestApplyUnified: cgroup v2 files (the kubelet's memory.swap.max) reach the spec on v2 and are
// refused on v1, where the runtime could not write them.
func TestApplyUnified(t *testing.T) {
	res := &runtimeapi.LinuxContainerResources{Unified: map[string]string{"memory.swap.max": "0"}}
	var r specs.LinuxResources
	if err := applyUnified(&r, res, host{unified: true}); err != nil || r.Unified["memory.swap.max"] != "0" {
		t.Fatalf("v2: %v %v", r.Unified, err)
	}
	r = specs.LinuxResources{}
	if err := applyUnified(&r, res, host{}); !errors.Is(err, errdefs.ErrInvalidArgument) || r.Unified != nil {
		t.Fatalf("v1: %v %v, want refused", r.Unified, err)
	}
	bad := &runtimeapi.LinuxContainerResources{Unified: map[string]string{"../memory.max": "0"}}
	if err := applyUnified(&r, bad, host{unified: true}); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("a path as a key: %v", err)
	}
}
