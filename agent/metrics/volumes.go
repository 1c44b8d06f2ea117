package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/internal/lazy"
)

// VolumeClaim is a persistent volume claim a pod uses, and its volume's figures as measured.
type VolumeClaim struct {
	Namespace, Claim string
	FS               statsapi.FsStats
}

var (
	volumesOnce sync.Once
	volumesMu   sync.Mutex
	volumesList func() []VolumeClaim
)

// VolumeStats registers the kubelet's kubelet_volume_stats_* series for the claims list gives,
// measured on each scrape (the volume manager measures them as the kubelet's volume plugins do).
// An agent made again in the same process (tests) reports its own.
func VolumeStats(list func() []VolumeClaim) {
	once.Do(build)
	volumesMu.Lock()
	volumesList = list
	volumesMu.Unlock()
	volumesOnce.Do(func() { registry.MustRegister(volumeCollector{}) })
}

type volumeDescSet struct {
	capacity, available, used, inodes, inodesFree, inodesUsed *prometheus.Desc
}

var volumeDescs = lazy.Value[*volumeDescSet]{New: func() *volumeDescSet {
	return &volumeDescSet{
		capacity:   volumeDesc("capacity_bytes", "Capacity in bytes of the volume"),
		available:  volumeDesc("available_bytes", "Number of available bytes in the volume"),
		used:       volumeDesc("used_bytes", "Number of used bytes in the volume"),
		inodes:     volumeDesc("inodes", "Maximum number of inodes in the volume"),
		inodesFree: volumeDesc("inodes_free", "Number of free inodes in the volume"),
		inodesUsed: volumeDesc("inodes_used", "Number of used inodes in the volume"),
	}
}}

func volumeDesc(name, help string) *prometheus.Desc {
	return prometheus.NewDesc("kubelet_volume_stats_"+name, help, []string{"namespace", "persistentvolumeclaim"}, nil)
}

type volumeCollector struct{}

func (volumeCollector) Describe(ch chan<- *prometheus.Desc) {
	d := volumeDescs.Get()
	for _, desc := range []*prometheus.Desc{d.capacity, d.available, d.used, d.inodes, d.inodesFree, d.inodesUsed} {
		ch <- desc
	}
}

// Collect reports each claim's figures; one a measure left out is not reported.
func (volumeCollector) Collect(ch chan<- prometheus.Metric) {
	volumesMu.Lock()
	list := volumesList
	volumesMu.Unlock()
	if list == nil {
		return
	}
	d := volumeDescs.Get()
	for _, c := range list() {
		for _, f := range []struct {
			desc *prometheus.Desc
			v    *uint64
		}{{d.capacity, c.FS.CapacityBytes}, {d.available, c.FS.AvailableBytes}, {d.used, c.FS.UsedBytes},
			{d.inodes, c.FS.Inodes}, {d.inodesFree, c.FS.InodesFree}, {d.inodesUsed, c.FS.InodesUsed}} {
			if f.v != nil {
				ch <- prometheus.MustNewConstMetric(f.desc, prometheus.GaugeValue, float64(*f.v), c.Namespace, c.Claim)
			}
		}
	}
}
