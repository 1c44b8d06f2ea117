// Package cadvisor serves the series cAdvisor gives the kubelet's /metrics/cadvisor, read from
// the pods' cgroups as cAdvisor reads them and named through CRI, so dashboards, alerts and
// prometheus-adapter rules written for the kubelet work on the agent over any runtime.
package cadvisor

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/cgroupfs"
)

// Runtime is the part of CRI that names the cgroups and gives the pods' network figures.
type Runtime interface {
	ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error)
	ListPodSandbox(ctx context.Context, in *runtimeapi.ListPodSandboxRequest, opts ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error)
	ListPodSandboxStats(ctx context.Context, in *runtimeapi.ListPodSandboxStatsRequest, opts ...grpc.CallOption) (*runtimeapi.ListPodSandboxStatsResponse, error)
}

// Config says where the figures come from.
type Config struct {
	FS cgroupfs.FS
	// PodsCgroup is the pods' root cgroup ("/kubepods"); the agent keeps pod cgroups below it.
	PodsCgroup string
	// ProcRoot is /proc (the machine's figures, the pods' processes and network namespaces).
	ProcRoot string
	// SysRoot is /sys (block devices' names).
	SysRoot string
	Runtime Runtime
	Now     func() time.Time
	Log     *slog.Logger
}

// Collector is a prometheus.Collector of cAdvisor's series.
type Collector struct {
	cfg Config
}

// New makes a collector; it reads nothing until scraped.
func New(cfg Config) *Collector {
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.SysRoot == "" {
		cfg.SysRoot = "/sys"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Collector{cfg: cfg}
}

// NewRegistry is what /metrics/cadvisor serves.
func NewRegistry(c *Collector) *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(c)
	return r
}

// scrapeTimeout bounds the CRI calls of one scrape.
const scrapeTimeout = 10 * time.Second

func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range allDescs() {
		ch <- d
	}
}

func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	d := descs.Get()
	c.collectMachine(ch)
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	k, err := c.known(ctx)
	if err != nil {
		c.cfg.Log.Warn("cadvisor metrics: the runtime's containers", "err", err)
		ch <- prometheus.MustNewConstMetric(d.scrapeError, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(d.scrapeError, prometheus.GaugeValue, 0)
	now := float64(c.cfg.Now().Unix())
	c.collectRoot(ch, now)
	groups := c.cgroups(k)
	devices := &deviceNames{sys: c.cfg.SysRoot, names: map[[2]uint64]string{}}
	pids := map[string][]int{} // by cgroup, read once a scrape
	for _, g := range groups {
		c.collectCgroup(ch, g, now, devices, pids)
	}
	c.collectNetwork(ctx, ch, k, groups, pids)
}
