package eviction

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func fsUsed(b uint64) *statsapi.FsStats { return &statsapi.FsStats{UsedBytes: &b} }

func storagePod(name string, vols []v1.Volume, limits ...string) *v1.Pod {
	p := pod(name, 0, 0)
	p.Spec.Volumes = vols
	if len(limits) > 0 {
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse(limits[0])}
	}
	return p
}

func emptyDir(name, limit string, medium v1.StorageMedium) v1.Volume {
	ed := &v1.EmptyDirVolumeSource{Medium: medium}
	if limit != "" {
		q := resource.MustParse(limit)
		ed.SizeLimit = &q
	}
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{EmptyDir: ed}}
}

func podStorage(name string, rootfs, logs uint64, volumes map[string]uint64) statsapi.PodStats {
	s := statsapi.PodStats{PodRef: statsapi.PodReference{Name: name, Namespace: "default", UID: name},
		Containers: []statsapi.ContainerStats{{Name: "c", Rootfs: fsUsed(rootfs), Logs: fsUsed(logs)}}}
	for n, u := range volumes {
		s.VolumeStats = append(s.VolumeStats, statsapi.VolumeStats{Name: n, FsStats: *fsUsed(u)})
	}
	return s
}

func TestStorageOverLimit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pod    *v1.Pod
		stats  statsapi.PodStats
		signal string
		msg    string
	}{
		{"emptyDir under its limit", storagePod("a", []v1.Volume{emptyDir("cache", "10Mi", "")}),
			podStorage("a", 0, 0, map[string]uint64{"cache": 10 << 20}), "", ""},
		{"emptyDir over its limit", storagePod("a", []v1.Volume{emptyDir("cache", "10Mi", "")}),
			podStorage("a", 0, 0, map[string]uint64{"cache": 10<<20 + 1}), signalEmptyDirFsLimit,
			`Usage of EmptyDir volume "cache" exceeds the limit "10Mi". `},
		{"memory emptyDir over its limit too", storagePod("a", []v1.Volume{emptyDir("shm", "1Mi", v1.StorageMediumMemory)}),
			podStorage("a", 0, 0, map[string]uint64{"shm": 2 << 20}), signalEmptyDirFsLimit,
			`Usage of EmptyDir volume "shm" exceeds the limit "1Mi". `},
		{"no limits at all", storagePod("a", []v1.Volume{emptyDir("cache", "", "")}),
			podStorage("a", 1<<30, 1<<30, map[string]uint64{"cache": 1 << 30}), "", ""},
		// One container: its own limit is the pod's too, and the pod's usage counts the disk
		// emptyDir, so the pod's check speaks first, as the kubelet's order has it.
		{"pod over the sum of limits with its emptyDir", storagePod("a", []v1.Volume{emptyDir("cache", "", "")}, "20Mi"),
			podStorage("a", 8<<20, 2<<20, map[string]uint64{"cache": 11 << 20}), signalEphemeralPodFsLimit,
			"Pod ephemeral local storage usage exceeds the total limit of containers 20Mi. "},
		{"a memory emptyDir uses no disk", storagePod("a", []v1.Volume{emptyDir("shm", "", v1.StorageMediumMemory)}, "20Mi"),
			podStorage("a", 8<<20, 2<<20, map[string]uint64{"shm": 100 << 20}), "", ""},
		{"container rootfs and logs over its limit", storagePod("a", nil, "20Mi"),
			podStorage("a", 15<<20, 6<<20, nil), signalEphemeralPodFsLimit,
			"Pod ephemeral local storage usage exceeds the total limit of containers 20Mi. "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sig, msg := storageOverLimit(tc.pod, tc.stats)
			if sig != tc.signal || msg != tc.msg {
				t.Errorf("got %q %q, want %q %q", sig, msg, tc.signal, tc.msg)
			}
		})
	}
	// Two containers: the pod's limit is their sum, so one container alone can be over its own.
	p := storagePod("b", nil, "20Mi")
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "d", Resources: v1.ResourceRequirements{
		Limits: v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("100Mi")}}})
	s := podStorage("b", 15<<20, 6<<20, nil)
	s.Containers = append(s.Containers, statsapi.ContainerStats{Name: "d", Rootfs: fsUsed(1 << 20)})
	if sig, msg := storageOverLimit(p, s); sig != signalEphemeralContainerFs || msg != `Container c exceeded its local ephemeral storage limit "20Mi". ` {
		t.Errorf("container over its own limit: %q %q", sig, msg)
	}
}

// A pass evicts every pod over a local storage limit before it looks at thresholds, but never a
// critical one, and reports the kubelet's signal names.
func TestLocalStorageEvictionInAPass(t *testing.T) {
	f := newFixture(t, map[string]string{"memory.available": "100Mi"}, nil, nil, 0)
	f.memory(4000)
	over := storagePod("over", []v1.Volume{emptyDir("cache", "1Mi", "")})
	critical := storagePod("critical", []v1.Volume{emptyDir("cache", "1Mi", "")})
	prio := int32(2000001000) // system-node-critical
	critical.Spec.Priority = &prio
	fine := storagePod("fine", []v1.Volume{emptyDir("cache", "1Mi", "")})
	f.pods = []*v1.Pod{fine, critical, over}
	var signals []string
	f.m.deps.Evicted = func(s string) { signals = append(signals, s) }
	f.m.deps.StorageStats = func(context.Context) ([]statsapi.PodStats, error) {
		return []statsapi.PodStats{
			podStorage("over", 0, 0, map[string]uint64{"cache": 2 << 20}),
			podStorage("critical", 0, 0, map[string]uint64{"cache": 2 << 20}),
			podStorage("fine", 0, 0, map[string]uint64{"cache": 1 << 10}),
		}, nil
	}
	if got := f.m.Synchronize(context.Background()); got == nil || got.Name != "over" {
		t.Fatalf("evicted %v, want over", got)
	}
	if len(f.kills) != 1 || f.kills[0].pod != "over" || f.kills[0].grace != hardEvictionGracePeriod ||
		!strings.HasPrefix(f.kills[0].msg, "Usage of EmptyDir volume") {
		t.Errorf("kills %+v", f.kills)
	}
	if len(signals) != 1 || signals[0] != "emptydirfs.limit" {
		t.Errorf("kubelet_evictions signals %v", signals)
	}
}

// Usage is read only while some pod that may be evicted sets a local storage limit: a node of
// pods without one, or whose only limited pod is critical, measures nothing each pass.
func TestLocalStorageUsageReadOnlyForLimitedPods(t *testing.T) {
	f := newFixture(t, map[string]string{"memory.available": "100Mi"}, nil, nil, 0)
	f.memory(4000)
	reads := 0
	f.m.deps.StorageStats = func(context.Context) ([]statsapi.PodStats, error) {
		reads++
		return nil, nil
	}
	prio := int32(2000001000) // system-node-critical
	critical := storagePod("critical", nil, "1Mi")
	critical.Spec.Priority = &prio
	f.pods = []*v1.Pod{storagePod("plain", []v1.Volume{emptyDir("cache", "", "")}), critical}
	f.m.Synchronize(context.Background())
	if reads != 0 {
		t.Fatalf("no pod to evict has a limit: usage read %d times", reads)
	}
	for _, p := range []*v1.Pod{
		storagePod("sized", []v1.Volume{emptyDir("cache", "1Mi", "")}),
		storagePod("limited", nil, "1Mi"),
	} {
		reads = 0
		f.pods = []*v1.Pod{p}
		f.m.Synchronize(context.Background())
		if reads != 1 {
			t.Errorf("pod %s has a limit: usage read %d times, want 1", p.Name, reads)
		}
	}
}
