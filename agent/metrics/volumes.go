package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/internal/lazy"
)

// VolumeClaim is a persistent volume claim a pod uses, and where its volume is on the host.
type VolumeClaim struct {
	Namespace, Claim, Path string
}

var (
	volumesOnce sync.Once
	volumesMu   sync.Mutex
	volumesList func() []VolumeClaim
)

// VolumeStats registers the kubelet's kubelet_volume_stats_* series for the claims list gives,
// measured on each scrape from their filesystems (statfs), as the kubelet measures the volumes
// of plugins that report filesystem metrics (local PVs). An agent made again in the same process
// (tests) reports its own.
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

// Collect measures each claim's filesystem; one that cannot be measured is left out.
func (volumeCollector) Collect(ch chan<- prometheus.Metric) {
	volumesMu.Lock()
	list := volumesList
	volumesMu.Unlock()
	if list == nil {
		return
	}
	d := volumeDescs.Get()
	for _, c := range list() {
		var st unix.Statfs_t
		if err := unix.Statfs(c.Path, &st); err != nil {
			continue
		}
		bs := float64(st.Bsize)
		g := func(desc *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, c.Namespace, c.Claim)
		}
		g(d.capacity, float64(st.Blocks)*bs)
		g(d.available, float64(st.Bavail)*bs)
		g(d.used, float64(st.Blocks-st.Bfree)*bs)
		g(d.inodes, float64(st.Files))
		g(d.inodesFree, float64(st.Ffree))
		g(d.inodesUsed, float64(st.Files-st.Ffree))
	}
}
