package eviction

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// PodUsage is what a pod uses, per container where the runtime says it.
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

// SummaryStats reads usage from the summary API's pod figures, as the kubelet ranks pods: the
// agent's stats provider gets them from ListPodSandboxStats, or from container stats on runtimes
// without it (containerd 1.6), so ranking works over both.
type SummaryStats struct{ Pods StorageStats }

// PodUsage is each running pod's memory working set (the pod's own figure, which includes the
// sandbox, or its containers' sum), its ephemeral storage (writable layers, logs, disk-backed
// emptyDirs) and its process count.
func (s SummaryStats) PodUsage(ctx context.Context) (map[types.UID]PodUsage, error) {
	pods, err := s.Pods(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[types.UID]PodUsage, len(pods))
	for _, ps := range pods {
		u := PodUsage{Containers: map[string]ContainerUsage{}}
		var sumMem, sumDisk int64
		for _, c := range ps.Containers {
			cu := ContainerUsage{}
			if c.Memory != nil && c.Memory.WorkingSetBytes != nil {
				cu.Memory = int64(*c.Memory.WorkingSetBytes)
			}
			for _, fs := range []*statsapi.FsStats{c.Rootfs, c.Logs} {
				if fs != nil && fs.UsedBytes != nil {
					cu.Disk += int64(*fs.UsedBytes)
				}
			}
			sumMem += cu.Memory
			sumDisk += cu.Disk
			u.Containers[c.Name] = cu
		}
		u.Memory = sumMem
		if ps.Memory != nil && ps.Memory.WorkingSetBytes != nil {
			u.Memory = max(u.Memory, int64(*ps.Memory.WorkingSetBytes))
		}
		u.Disk = sumDisk
		if ps.EphemeralStorage != nil && ps.EphemeralStorage.UsedBytes != nil {
			u.Disk = max(u.Disk, int64(*ps.EphemeralStorage.UsedBytes))
		}
		if ps.ProcessStats != nil && ps.ProcessStats.ProcessCount != nil {
			u.Processes = int64(*ps.ProcessStats.ProcessCount)
		}
		out[types.UID(ps.PodRef.UID)] = u
	}
	return out, nil
}
