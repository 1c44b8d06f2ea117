package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/internal/lazy"
)

// SummaryFunc returns the node's stats summary (the same data as /stats/summary).
type SummaryFunc func(ctx context.Context) (*statsapi.Summary, error)

// resourceDescs are the descriptors of /metrics/resource, made with the first collector rather
// than at init (modes without the agent never serve them).
type resourceDescs struct {
	nodeCPU, nodeMem, nodeSwap, ctrCPU, ctrMem, ctrStart, podCPU, podMem, scrapeErr, oldScrapeErr *prometheus.Desc
}

var descs = lazy.Value[*resourceDescs]{New: func() *resourceDescs {
	return &resourceDescs{
		nodeCPU:      prometheus.NewDesc("node_cpu_usage_seconds_total", "Cumulative cpu time consumed by the node in core-seconds", nil, nil),
		nodeMem:      prometheus.NewDesc("node_memory_working_set_bytes", "Current working set of the node in bytes", nil, nil),
		nodeSwap:     prometheus.NewDesc("node_swap_usage_bytes", "Current swap usage of the node in bytes. Reported only on non-windows systems", nil, nil),
		ctrCPU:       prometheus.NewDesc("container_cpu_usage_seconds_total", "Cumulative cpu time consumed by the container in core-seconds", []string{"container", "pod", "namespace"}, nil),
		ctrMem:       prometheus.NewDesc("container_memory_working_set_bytes", "Current working set of the container in bytes", []string{"container", "pod", "namespace"}, nil),
		ctrStart:     prometheus.NewDesc("container_start_time_seconds", "Start time of the container since unix epoch in seconds", []string{"container", "pod", "namespace"}, nil),
		podCPU:       prometheus.NewDesc("pod_cpu_usage_seconds_total", "Cumulative cpu time consumed by the pod in core-seconds", []string{"pod", "namespace"}, nil),
		podMem:       prometheus.NewDesc("pod_memory_working_set_bytes", "Current working set of the pod in bytes", []string{"pod", "namespace"}, nil),
		scrapeErr:    prometheus.NewDesc("resource_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", nil, nil),
		oldScrapeErr: prometheus.NewDesc("scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", nil, nil),
	}
}}

// NewResourceRegistry is what /metrics/resource serves: CPU and memory of the node, pods and
// containers, as metrics-server reads them.
func NewResourceRegistry(summary SummaryFunc) *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(&resourceCollector{summary: summary})
	return r
}

type resourceCollector struct{ summary SummaryFunc }

func (c *resourceCollector) Describe(ch chan<- *prometheus.Desc) {
	d := descs.Get()
	for _, d := range []*prometheus.Desc{d.nodeCPU, d.nodeMem, d.nodeSwap, d.ctrCPU, d.ctrMem, d.ctrStart, d.podCPU, d.podMem, d.scrapeErr, d.oldScrapeErr} {
		ch <- d
	}
}

func (c *resourceCollector) Collect(ch chan<- prometheus.Metric) {
	d := descs.Get()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.summary(ctx)
	failed := 0.0
	if err != nil {
		failed = 1
	}
	ch <- prometheus.MustNewConstMetric(d.scrapeErr, prometheus.GaugeValue, failed)
	ch <- prometheus.MustNewConstMetric(d.oldScrapeErr, prometheus.GaugeValue, failed)
	if s == nil {
		return
	}
	cpuMem(ch, s.Node.CPU, s.Node.Memory, d.nodeCPU, d.nodeMem)
	if sw := s.Node.Swap; sw != nil && sw.SwapUsageBytes != nil {
		ch <- prometheus.NewMetricWithTimestamp(sw.Time.Time, prometheus.MustNewConstMetric(d.nodeSwap, prometheus.GaugeValue, float64(*sw.SwapUsageBytes)))
	}
	for _, p := range s.Pods {
		cpuMem(ch, p.CPU, p.Memory, d.podCPU, d.podMem, p.PodRef.Name, p.PodRef.Namespace)
		for _, ctr := range p.Containers {
			cpuMem(ch, ctr.CPU, ctr.Memory, d.ctrCPU, d.ctrMem, ctr.Name, p.PodRef.Name, p.PodRef.Namespace)
			if !ctr.StartTime.IsZero() {
				ch <- prometheus.MustNewConstMetric(d.ctrStart, prometheus.GaugeValue, float64(ctr.StartTime.Unix()), ctr.Name, p.PodRef.Name, p.PodRef.Namespace)
			}
		}
	}
}

func cpuMem(ch chan<- prometheus.Metric, cpu *statsapi.CPUStats, mem *statsapi.MemoryStats, cpuDesc, memDesc *prometheus.Desc, labels ...string) {
	if cpu != nil && cpu.UsageCoreNanoSeconds != nil {
		ch <- prometheus.NewMetricWithTimestamp(cpu.Time.Time, prometheus.MustNewConstMetric(cpuDesc, prometheus.CounterValue, float64(*cpu.UsageCoreNanoSeconds)/1e9, labels...))
	}
	if mem != nil && mem.WorkingSetBytes != nil {
		ch <- prometheus.NewMetricWithTimestamp(mem.Time.Time, prometheus.MustNewConstMetric(memDesc, prometheus.GaugeValue, float64(*mem.WorkingSetBytes), labels...))
	}
}
