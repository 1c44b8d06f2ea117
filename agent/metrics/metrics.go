// Package metrics holds the agent's Prometheus metrics under the upstream kubelet's names, so
// dashboards and alerts written for the kubelet work unchanged. Other agent packages record through
// the functions here; the API server exposes Registry at /metrics.
package metrics

import (
	"context"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

const subsystem = "kubelet"

// The metrics are made and registered on first use rather than in an init: the Go collector
// alone reads the runtime's metric descriptions, and `nodelet runtime`, which links this
// package, never records an agent metric.
var (
	once     sync.Once
	registry *prometheus.Registry

	podStartSLI             prometheus.Histogram
	podStart                prometheus.Histogram
	podWorker               *prometheus.HistogramVec
	runningPods             prometheus.Gauge
	runningContainers       *prometheus.GaugeVec
	plegRelist              prometheus.Histogram
	plegInterval            prometheus.Histogram
	plegLastSeen            prometheus.Gauge
	runtimeOps              *prometheus.CounterVec
	runtimeOpsDuration      *prometheus.HistogramVec
	runtimeOpsErrors        *prometheus.CounterVec
	startedPods             prometheus.Counter
	startedPodsErrors       prometheus.Counter
	startedContainers       *prometheus.CounterVec
	startedContainersErrors *prometheus.CounterVec
	nodeName                *prometheus.GaugeVec
	httpRequests            *prometheus.CounterVec
	httpDuration            *prometheus.HistogramVec
	httpInflight            *prometheus.GaugeVec
	evictions               *prometheus.CounterVec
	imagePull               *prometheus.HistogramVec
	cpuPinning              prometheus.Counter
	cpuPinningErrors        prometheus.Counter
	cpuSharedPool           prometheus.Gauge
	cpuExclusive            prometheus.Gauge
)

// Registry is what /metrics serves: the agent's metrics plus Go and process figures.
func Registry() *prometheus.Registry {
	once.Do(build)
	return registry
}

func build() {
	registry = prometheus.NewRegistry()

	podStartSLI = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "pod_start_sli_duration_seconds",
		Help:    "Duration in seconds to start a pod, excluding time to pull images and run init containers, measured from pod creation timestamp to when all its containers are reported as started and observed via watch",
		Buckets: []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600},
	})
	podStart = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "pod_start_duration_seconds",
		Help:    "Duration in seconds from the agent seeing a pod for the first time to the pod starting to run",
		Buckets: []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600},
	})
	podWorker = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "pod_worker_duration_seconds",
		Help:    "Duration in seconds to sync a single pod. Broken down by operation type: create, update, or sync",
		Buckets: prometheus.DefBuckets,
	}, []string{"operation_type"})
	runningPods = prometheus.NewGauge(prometheus.GaugeOpts{
		Subsystem: subsystem, Name: "running_pods",
		Help: "Number of pods that have a running pod sandbox",
	})
	runningContainers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem, Name: "running_containers",
		Help: "Number of containers currently running",
	}, []string{"container_state"})
	plegRelist = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "pleg_relist_duration_seconds",
		Help:    "Duration in seconds for relisting pods in PLEG.",
		Buckets: prometheus.DefBuckets,
	})
	plegInterval = prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "pleg_relist_interval_seconds",
		Help:    "Interval in seconds between relisting in PLEG.",
		Buckets: prometheus.DefBuckets,
	})
	plegLastSeen = prometheus.NewGauge(prometheus.GaugeOpts{
		Subsystem: subsystem, Name: "pleg_last_seen_seconds",
		Help: "Timestamp in seconds when PLEG was last seen active.",
	})
	runtimeOps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "runtime_operations_total",
		Help: "Cumulative number of runtime operations by operation type.",
	}, []string{"operation_type"})
	runtimeOpsDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "runtime_operations_duration_seconds",
		Help:    "Duration in seconds of runtime operations. Broken down by operation type.",
		Buckets: prometheus.ExponentialBuckets(.005, 2.5, 14),
	}, []string{"operation_type"})
	runtimeOpsErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "runtime_operations_errors_total",
		Help: "Cumulative number of runtime operation errors by operation type.",
	}, []string{"operation_type"})
	startedPods = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "started_pods_total",
		Help: "Cumulative number of pods started",
	})
	startedPodsErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "started_pods_errors_total",
		Help: "Cumulative number of errors when starting pods",
	})
	startedContainers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "started_containers_total",
		Help: "Cumulative number of containers started",
	}, []string{"container_type"})
	startedContainersErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "started_containers_errors_total",
		Help: "Cumulative number of errors when starting containers",
	}, []string{"container_type", "code"})
	nodeName = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem, Name: "node_name",
		Help: "The node's name. The count is always 1.",
	}, []string{"node"})
	httpRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "http_requests_total",
		Help: "Number of the http requests received since the server started",
	}, []string{"method", "path", "server_type", "long_running"})
	httpDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "http_requests_duration_seconds",
		Help:    "Duration in seconds to serve http requests",
		Buckets: prometheus.DefBuckets,
	}, []string{"method", "path", "server_type", "long_running"})
	httpInflight = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Subsystem: subsystem, Name: "http_inflight_requests",
		Help: "Number of the inflight http requests",
	}, []string{"method", "path", "server_type", "long_running"})
	evictions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Subsystem: subsystem, Name: "evictions",
		Help: "Cumulative number of pod evictions by eviction signal",
	}, []string{"eviction_signal"})
	imagePull = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Subsystem: subsystem, Name: "image_pull_duration_seconds",
		Help:    "Duration in seconds to pull an image.",
		Buckets: []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600},
	}, []string{"image_size_in_bytes"})
	cpuPinning = prometheus.NewCounter(prometheus.CounterOpts{Subsystem: subsystem, Name: "cpu_manager_pinning_requests_total",
		Help: "The number of cpu core allocations which required pinning."})
	cpuPinningErrors = prometheus.NewCounter(prometheus.CounterOpts{Subsystem: subsystem, Name: "cpu_manager_pinning_errors_total",
		Help: "The number of cpu core allocations which required pinning failed."})
	cpuSharedPool = prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: subsystem, Name: "cpu_manager_shared_pool_size_millicores",
		Help: "The size of the shared CPU pool for non-guaranteed QoS pods, in millicores."})
	cpuExclusive = prometheus.NewGauge(prometheus.GaugeOpts{Subsystem: subsystem, Name: "cpu_manager_exclusive_cpu_allocation_count",
		Help: "The total number of CPUs exclusively allocated to containers running on this node"})
	registry.MustRegister(
		cpuPinning, cpuPinningErrors, cpuSharedPool, cpuExclusive,
		podStartSLI, podStart, podWorker, runningPods, runningContainers,
		plegRelist, plegInterval, plegLastSeen,
		runtimeOps, runtimeOpsDuration, runtimeOpsErrors,
		startedPods, startedPodsErrors, startedContainers, startedContainersErrors,
		nodeName, httpRequests, httpDuration, httpInflight, evictions, imagePull,
		// What collectors.NewGoCollector and collectors.NewProcessCollector return, without linking
		// that package: its inits compile regexps and it links database/sql, in every mode of nodelet.
		prometheus.NewGoCollector(),                                       //nolint:staticcheck // the same collector
		prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}), //nolint:staticcheck // the same collector
	)
}

// ObservePodStartSLI records a pod's start, from its creation to all containers seen started, minus
// the time spent pulling images (the upstream SLI's definition).
func ObservePodStartSLI(d time.Duration) { once.Do(build); podStartSLI.Observe(d.Seconds()) }

// ObservePodStart records the time from the agent first seeing a pod to it running.
func ObservePodStart(d time.Duration) { once.Do(build); podStart.Observe(d.Seconds()) }

// ObservePodWorker records one pod sync; op is "create", "update", "sync" or "kill".
func ObservePodWorker(op string, d time.Duration) {
	once.Do(build)
	podWorker.WithLabelValues(op).Observe(d.Seconds())
}

// SetRunningPods sets the number of pods with a ready sandbox.
func SetRunningPods(n int) { once.Do(build); runningPods.Set(float64(n)) }

// SetContainerStates sets the count of containers per state ("running", "exited", "created", "unknown").
func SetContainerStates(counts map[string]int) {
	once.Do(build)
	runningContainers.Reset()
	for state, n := range counts {
		runningContainers.WithLabelValues(state).Set(float64(n))
	}
}

// ObservePLEGRelist records one relist: how long it took and how long since the previous one.
func ObservePLEGRelist(took, interval time.Duration, at time.Time) {
	once.Do(build)
	plegRelist.Observe(took.Seconds())
	if interval > 0 {
		plegInterval.Observe(interval.Seconds())
	}
	plegLastSeen.Set(float64(at.Unix()))
}

// PodStarted counts a pod start attempt.
func PodStarted(err error) {
	once.Do(build)
	startedPods.Inc()
	if err != nil {
		startedPodsErrors.Inc()
	}
}

// ContainerStarted counts a container start; kind is "container", "init_container" or
// "ephemeral_container".
func ContainerStarted(kind string, err error) {
	once.Do(build)
	startedContainers.WithLabelValues(kind).Inc()
	if err != nil {
		startedContainersErrors.WithLabelValues(kind, status.Code(err).String()).Inc()
	}
}

// SetNodeName publishes the node's name.
func SetNodeName(name string) {
	once.Do(build)
	nodeName.Reset()
	nodeName.WithLabelValues(name).Set(1)
}

// CPUPinning counts one container's request for exclusive CPUs, and whether it failed.
func CPUPinning(failed bool) {
	once.Do(build)
	cpuPinning.Inc()
	if failed {
		cpuPinningErrors.Inc()
	}
}

// SetCPUPools publishes the shared pool's size and how many CPUs are held exclusively.
func SetCPUPools(sharedCPUs, exclusiveCPUs int) {
	once.Do(build)
	cpuSharedPool.Set(float64(sharedCPUs * 1000))
	cpuExclusive.Set(float64(exclusiveCPUs))
}

// Evicted counts one pod evicted for signal (e.g. "memory.available").
func Evicted(signal string) { once.Do(build); evictions.WithLabelValues(signal).Inc() }

// ObserveImagePull records a pull of an image of size bytes (bucketed as upstream does).
func ObserveImagePull(size int64, d time.Duration) {
	once.Do(build)
	imagePull.WithLabelValues(sizeBucket(size)).Observe(d.Seconds())
}

func sizeBucket(size int64) string {
	const mb, gb = 1 << 20, 1 << 30
	switch {
	case size < 10*mb:
		return "0-10MB"
	case size < 100*mb:
		return "10MB-100MB"
	case size < 500*mb:
		return "100MB-500MB"
	case size < gb:
		return "500MB-1GB"
	case size < 5*gb:
		return "1GB-5GB"
	case size < 10*gb:
		return "5GB-10GB"
	case size < 20*gb:
		return "10GB-20GB"
	}
	return "20GB+"
}

// ObserveRuntimeOperation records one CRI call (operation as upstream names them, e.g.
// "create_container", "list_podsandbox").
func ObserveRuntimeOperation(operation string, d time.Duration, err error) {
	once.Do(build)
	runtimeOps.WithLabelValues(operation).Inc()
	runtimeOpsDuration.WithLabelValues(operation).Observe(d.Seconds())
	if err != nil {
		runtimeOpsErrors.WithLabelValues(operation).Inc()
	}
}

// UnaryClientInterceptor records every unary CRI call under kubelet_runtime_operations_*; the agent
// passes it to grpc.NewClient for its runtime and image connections.
func UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		start := time.Now()
		err := invoker(ctx, method, req, reply, cc, opts...)
		ObserveRuntimeOperation(OperationName(method), time.Since(start), err)
		return err
	}
}

var opNames sync.Map

// OperationName turns "/runtime.v1.RuntimeService/RunPodSandbox" into "run_podsandbox", the
// upstream kubelet's spelling.
func OperationName(fullMethod string) string {
	if v, ok := opNames.Load(fullMethod); ok {
		return v.(string)
	}
	m := fullMethod[strings.LastIndexByte(fullMethod, '/')+1:]
	m = strings.ReplaceAll(m, "PodSandbox", "Podsandbox")
	var b strings.Builder
	for i, r := range m {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	name := b.String()
	opNames.Store(fullMethod, name)
	return name
}

// HTTPLabels are the labels of one API request.
type HTTPLabels struct {
	Method, Path, ServerType string
	LongRunning              bool
}

// ObserveHTTP wraps one API request: call the returned func when it is done.
func ObserveHTTP(l HTTPLabels) func() {
	once.Do(build)
	lr := "false"
	if l.LongRunning {
		lr = "true"
	}
	values := []string{l.Method, l.Path, l.ServerType, lr}
	httpRequests.WithLabelValues(values...).Inc()
	g := httpInflight.WithLabelValues(values...)
	g.Inc()
	start := time.Now()
	return func() {
		g.Dec()
		httpDuration.WithLabelValues(values...).Observe(time.Since(start).Seconds())
	}
}
