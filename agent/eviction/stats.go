package eviction

import (
	"context"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PodUsage is what a pod uses, per container where CRI says it.
type PodUsage struct {
	Memory, Disk, Processes int64
	Containers              map[string]ContainerUsage
}

// ContainerUsage is one container's share of a PodUsage.
type ContainerUsage struct{ Memory, Disk int64 }

// PodStats gives pods' usage by UID.
type PodStats interface {
	PodUsage(ctx context.Context) (map[types.UID]PodUsage, error)
}

// SandboxStatsLister is the one CRI call the manager makes (runtimeapi.RuntimeServiceClient).
type SandboxStatsLister interface {
	ListPodSandboxStats(ctx context.Context, in *runtimeapi.ListPodSandboxStatsRequest, opts ...grpc.CallOption) (*runtimeapi.ListPodSandboxStatsResponse, error)
}

// CRIStats reads usage from the runtime's ListPodSandboxStats, which containerd answers too.
type CRIStats struct{ Runtime SandboxStatsLister }

// PodUsage sums a pod's sandboxes (a restarted pod has a dead one beside the live one, using nothing).
// Disk is the containers' writable layers: CRI reports no log or volume usage.
func (c CRIStats) PodUsage(ctx context.Context) (map[types.UID]PodUsage, error) {
	resp, err := c.Runtime.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{})
	if err != nil {
		return nil, err
	}
	out := map[types.UID]PodUsage{}
	for _, s := range resp.Stats {
		if s.GetAttributes().GetMetadata() == nil || s.Linux == nil {
			continue
		}
		uid := types.UID(s.Attributes.Metadata.Uid)
		u := out[uid]
		if u.Containers == nil {
			u.Containers = map[string]ContainerUsage{}
		}
		var podMem int64
		if m := s.Linux.GetMemory(); m != nil && m.WorkingSetBytes != nil {
			podMem = int64(m.WorkingSetBytes.Value)
		}
		var sumMem int64
		for _, cs := range s.Linux.Containers {
			name := cs.GetAttributes().GetMetadata().GetName()
			cu := u.Containers[name]
			if m := cs.GetMemory(); m != nil && m.WorkingSetBytes != nil {
				cu.Memory += int64(m.WorkingSetBytes.Value)
				sumMem += int64(m.WorkingSetBytes.Value)
			}
			if w := cs.GetWritableLayer(); w != nil && w.UsedBytes != nil {
				cu.Disk += int64(w.UsedBytes.Value)
				u.Disk += int64(w.UsedBytes.Value)
			}
			u.Containers[name] = cu
		}
		// The sandbox's own figure includes the pause process; fall back to the containers' sum.
		u.Memory += max(podMem, sumMem)
		if p := s.Linux.GetProcess(); p != nil && p.ProcessCount != nil {
			u.Processes += int64(p.ProcessCount.Value)
		}
		out[uid] = u
	}
	return out, nil
}
