package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/procfs"
)

// The probes' metrics, which the kubelet serves apart at /metrics/probes (probe alerting scrapes
// them): a count of probe runs by result, and how long the runs that gave one took.
var probes struct {
	once     sync.Once
	registry *prometheus.Registry
	total    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func buildProbes() {
	probes.total = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: "prober", Name: "probe_total",
		Help: "Cumulative number of a liveness, readiness or startup probe for a container by result.",
	}, []string{"probe_type", "result", "container", "pod", "namespace", "pod_uid"})
	probes.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: "prober", Name: "probe_duration_seconds",
		Help:    "Duration in seconds for a probe response.",
		Buckets: prometheus.DefBuckets,
	}, []string{"probe_type", "container", "pod", "namespace"})
	probes.registry = prometheus.NewRegistry()
	probes.registry.MustRegister(probes.total, probes.duration, processStartTime())
}

// processStartTime is the one process series the kubelet's /metrics/probes carries beside them.
func processStartTime() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "process_start_time_seconds",
		Help: "Start time of the process since unix epoch in seconds.",
	}, func() float64 {
		p, err := procfs.Self()
		if err != nil {
			return 0
		}
		st, err := p.Stat()
		if err != nil {
			return 0
		}
		t, err := st.StartTime()
		if err != nil {
			return 0
		}
		return t
	})
}

// ProbesRegistry is what /metrics/probes serves.
func ProbesRegistry() *prometheus.Registry {
	probes.once.Do(buildProbes)
	return probes.registry
}

// ProbeLabels name one probe of one container.
type ProbeLabels struct {
	ProbeType, Container, Pod, Namespace, PodUID string
}

// ProbeResult counts a probe run by its result (successful, failed or unknown, as the kubelet
// names them), and its duration when it gave a result.
func ProbeResult(l ProbeLabels, result string, seconds float64) {
	probes.once.Do(buildProbes)
	probes.total.WithLabelValues(l.ProbeType, result, l.Container, l.Pod, l.Namespace, l.PodUID).Inc()
	if result != "failed" {
		probes.duration.WithLabelValues(l.ProbeType, l.Container, l.Pod, l.Namespace).Observe(seconds)
	}
}

// ForgetProbe drops a stopped probe's series, as the kubelet's worker does when it ends.
func ForgetProbe(l ProbeLabels) {
	probes.once.Do(buildProbes)
	for _, r := range []string{"successful", "failed", "unknown"} {
		probes.total.DeleteLabelValues(l.ProbeType, r, l.Container, l.Pod, l.Namespace, l.PodUID)
	}
	probes.duration.DeleteLabelValues(l.ProbeType, l.Container, l.Pod, l.Namespace)
}
