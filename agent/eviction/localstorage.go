package eviction

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Local storage limits, in the kubelet's words; the signal names label kubelet_evictions.
const (
	emptyDirMessageFmt           = "Usage of EmptyDir volume %q exceeds the limit %q. "
	podEphemeralMessageFmt       = "Pod ephemeral local storage usage exceeds the total limit of containers %s. "
	containerEphemeralMessageFmt = "Container %s exceeded its local ephemeral storage limit %q. "
	signalEmptyDirFsLimit        = "emptydirfs.limit"
	signalEphemeralPodFsLimit    = "ephemeralpodfs.limit"
	signalEphemeralContainerFs   = "ephemeralcontainerfs.limit"
)

// StorageStats gives the running pods' figures as the summary API reports them: containers'
// writable layers and logs, and each volume's usage.
type StorageStats func(ctx context.Context) ([]statsapi.PodStats, error)

// localStorageEviction evicts every pod over one of its local storage limits, as the kubelet's
// localStorageCapacityIsolation does before it looks at node-level thresholds: an emptyDir over its
// sizeLimit, the pod's ephemeral usage over the sum of its containers' ephemeral-storage limits, a
// container's writable layer and logs over its own limit. It returns the pods evicted.
func (m *Manager) localStorageEviction(ctx context.Context) []*v1.Pod {
	if m.deps.StorageStats == nil {
		return nil
	}
	// Usage is measured only when some pod has a limit to be over: reading every container's
	// writable layer, logs and cgroups every pass cost an idle node of 50 pods a fifth of its CPU.
	var limited []*v1.Pod
	for _, p := range m.deps.ActivePods() {
		if hasStorageLimit(p) && !IsCriticalPod(p) {
			limited = append(limited, p)
		}
	}
	if len(limited) == 0 {
		return nil
	}
	stats, err := m.deps.StorageStats(ctx)
	if err != nil {
		m.deps.Log.Warn("eviction manager: pod storage stats", "err", err)
		return nil
	}
	byUID := map[types.UID]statsapi.PodStats{}
	for _, s := range stats {
		byUID[types.UID(s.PodRef.UID)] = s
	}
	var evicted []*v1.Pod
	for _, p := range limited {
		s, ok := byUID[p.UID]
		if !ok {
			continue
		}
		signal, msg := storageOverLimit(p, s)
		if msg == "" {
			continue
		}
		if m.evict(p, hardEvictionGracePeriod, msg, signal) {
			evicted = append(evicted, p)
		}
	}
	return evicted
}

// hasStorageLimit says whether the pod sets a limit storageOverLimit checks: an emptyDir's
// sizeLimit, or an ephemeral-storage limit on the pod or any of its containers.
func hasStorageLimit(p *v1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if ed := v.EmptyDir; ed != nil && ed.SizeLimit != nil && ed.SizeLimit.Sign() > 0 {
			return true
		}
	}
	_, ok := resourcehelper.PodLimits(p, resourcehelper.PodResourcesOptions{})[v1.ResourceEphemeralStorage]
	return ok
}

// storageOverLimit names the first local storage limit the pod is over, and the message for it.
func storageOverLimit(p *v1.Pod, s statsapi.PodStats) (signal, message string) {
	volumeUsed := map[string]uint64{}
	for _, v := range s.VolumeStats {
		if v.UsedBytes != nil {
			volumeUsed[v.Name] = *v.UsedBytes
		}
	}
	for _, v := range p.Spec.Volumes {
		ed := v.EmptyDir
		if ed == nil || ed.SizeLimit == nil || ed.SizeLimit.Sign() <= 0 {
			continue
		}
		if used, ok := volumeUsed[v.Name]; ok && overLimit(used, *ed.SizeLimit) {
			return signalEmptyDirFsLimit, fmt.Sprintf(emptyDirMessageFmt, v.Name, ed.SizeLimit.String())
		}
	}
	containerUsed := map[string]uint64{}
	var podUsed uint64
	for _, c := range s.Containers {
		var used uint64
		for _, fs := range []*statsapi.FsStats{c.Rootfs, c.Logs} {
			if fs != nil && fs.UsedBytes != nil {
				used += *fs.UsedBytes
			}
		}
		containerUsed[c.Name] = used
		podUsed += used
	}
	// Disk-backed emptyDirs count toward the pod; memory and huge page ones, and the agent's
	// configMap, secret and downward API volumes (tmpfs here), use no node disk.
	for _, v := range p.Spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.Medium == v1.StorageMediumDefault {
			podUsed += volumeUsed[v.Name]
		}
	}
	if limit, ok := resourcehelper.PodLimits(p, resourcehelper.PodResourcesOptions{})[v1.ResourceEphemeralStorage]; ok && overLimit(podUsed, limit) {
		return signalEphemeralPodFsLimit, fmt.Sprintf(podEphemeralMessageFmt, limit.String())
	}
	for _, c := range append(append([]v1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		limit, ok := c.Resources.Limits[v1.ResourceEphemeralStorage]
		if ok && overLimit(containerUsed[c.Name], limit) {
			return signalEphemeralContainerFs, fmt.Sprintf(containerEphemeralMessageFmt, c.Name, limit.String())
		}
	}
	return "", ""
}

func overLimit(used uint64, limit resource.Quantity) bool {
	return resource.NewQuantity(int64(used), resource.BinarySI).Cmp(limit) > 0
}
