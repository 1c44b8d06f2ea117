// Package server is the agent's HTTP API, the kubelet's port-10250 surface: /healthz, /pods,
// /node (nodelet's own: the Node and its events), /runningpods, /containerLogs, /exec, /attach, /portForward, /stats/summary, /metrics,
// /metrics/resource, /metrics/probes, /metrics/cadvisor, /logs/ and /configz. It depends on the agent only through the small interfaces below, and on the
// runtime only through CRI, so tests run it on fakes and any CRI runtime serves its streams. NewServing
// (serving.go) serves it where the agent's configuration asks, with what HTTPS takes; ServeHealthz
// serves the healthz port.
package server

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/agent/cadvisor"
	"github.com/nodelet/nodelet/agent/metrics"
	"github.com/nodelet/nodelet/agent/stats"
	"github.com/nodelet/nodelet/internal/cgroupfs"
)

// PodSource is the agent's desired pods with their latest status.
type PodSource interface {
	// Pods returns the pods the agent runs, each with its current status. The server does not
	// modify them.
	Pods() []*v1.Pod
	// Pod returns one pod by namespace and name.
	Pod(namespace, name string) (*v1.Pod, bool)
}

// EventSource is optional: the events the agent recorded about a pod, for `nodelet describe`.
type EventSource interface {
	PodEvents(namespace, name string) []v1.Event
}

// NodeSource is optional: the agent's own Node as it keeps it (also standalone) and the events
// recorded about it, for `nodelet get node` and `nodelet describe node`.
type NodeSource interface {
	// Node is the latest Node; false before the agent has built it.
	Node() (*v1.Node, bool)
	NodeEvents() []v1.Event
}

// Runtime is the CRI the API calls; a runtimeapi.RuntimeServiceClient is one.
type Runtime interface {
	Status(ctx context.Context, in *runtimeapi.StatusRequest, opts ...grpc.CallOption) (*runtimeapi.StatusResponse, error)
	ListPodSandbox(ctx context.Context, in *runtimeapi.ListPodSandboxRequest, opts ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error)
	ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error)
	ContainerStatus(ctx context.Context, in *runtimeapi.ContainerStatusRequest, opts ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error)
	Exec(ctx context.Context, in *runtimeapi.ExecRequest, opts ...grpc.CallOption) (*runtimeapi.ExecResponse, error)
	Attach(ctx context.Context, in *runtimeapi.AttachRequest, opts ...grpc.CallOption) (*runtimeapi.AttachResponse, error)
	PortForward(ctx context.Context, in *runtimeapi.PortForwardRequest, opts ...grpc.CallOption) (*runtimeapi.PortForwardResponse, error)
	stats.Runtime
}

// Deps is what the API needs from the agent.
type Deps struct {
	NodeName string
	Pods     PodSource
	Events   EventSource // nil: describe shows no events
	Node     NodeSource  // nil: /node answers 404
	Runtime  Runtime
	// SyncLoopHealthy reports whether the SyncLoop ran recently (nil: not checked).
	SyncLoopHealthy func() error
	// Summary is /stats/summary; nil uses stats.New(Runtime, stats.Options{NodeName: NodeName}).
	Summary func(ctx context.Context) (*statsapi.Summary, error)
	// Metrics is /metrics; nil uses metrics.Registry().
	Metrics prometheus.Gatherer
	// Cadvisor is /metrics/cadvisor; nil serves cAdvisor's series of the machine alone.
	Cadvisor prometheus.Gatherer
	// NodeLogDir, when set ("/var/log"), is served read-only under /logs/, as the kubelet's
	// system log handler does; "" is the handler turned off (enableSystemLogHandler false).
	NodeLogDir string
	// Config, when set, is /configz: the effective configuration as a KubeletConfiguration, under
	// "kubeletconfig", as the kubelet answers.
	Config func() any
	// Limits bound what one client may hold of the server; zero fields take the defaults.
	Limits Limits
}

// Limits bound the connections and requests of the API's listeners.
type Limits struct {
	// ReadHeaderTimeout bounds how long a client may take to send a request's headers (10s).
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection with no request for that long (2m).
	IdleTimeout time.Duration
	// MaxBodyBytes refuses a larger request body with 413 (1 MiB). No endpoint takes a body of
	// any size: streams carry their data after the upgrade, not in the body.
	MaxBodyBytes int64
}

func (l Limits) withDefaults() Limits {
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = 10 * time.Second
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = 2 * time.Minute
	}
	if l.MaxBodyBytes <= 0 {
		l.MaxBodyBytes = 1 << 20
	}
	return l
}

// Server routes the API. It is an http.Handler without authentication: Serve* add what the
// listener needs.
type Server struct {
	d   Deps
	mux *http.ServeMux
}

// New builds the API on d.
func New(d Deps) *Server {
	if d.Summary == nil {
		d.Summary = stats.New(d.Runtime, stats.Options{NodeName: d.NodeName}).Summary
	}
	if d.Metrics == nil {
		d.Metrics = metrics.Registry()
	}
	if d.Cadvisor == nil {
		d.Cadvisor = cadvisor.NewRegistry(cadvisor.New(cadvisor.Config{FS: cgroupfs.Host(), Runtime: d.Runtime}))
	}
	d.Limits = d.Limits.withDefaults()
	s := &Server{d: d, mux: http.NewServeMux()}
	s.routes()
	return s
}

func (s *Server) routes() {
	handle := func(pattern, label string, longRunning bool, h http.HandlerFunc) {
		s.mux.Handle(pattern, instrument(label, longRunning, h))
	}
	handle("GET /healthz", "healthz", false, s.healthz)
	handle("GET /healthz/{check}", "healthz", false, s.healthz)
	handle("GET /pods", "pods", false, s.pods)
	handle("GET /runningpods/", "runningpods", false, s.runningPods)
	handle("GET /runningpods", "runningpods", false, s.runningPods)
	handle("GET /events/{ns}/{pod}", "events", false, s.events)
	handle("GET /node", "node", false, s.node)
	handle("GET /node/events", "node", false, s.nodeEvents)
	handle("GET /containerLogs/{ns}/{pod}/{container}", "containerLogs", true, s.containerLogs)
	for _, verb := range []string{"exec", "attach"} {
		h := s.exec
		if verb == "attach" {
			h = s.attach
		}
		handle("/"+verb+"/{ns}/{pod}/{container}", verb, true, h)
		handle("/"+verb+"/{ns}/{pod}/{uid}/{container}", verb, true, h)
	}
	handle("/portForward/{ns}/{pod}", "portForward", true, s.portForward)
	handle("/portForward/{ns}/{pod}/{uid}", "portForward", true, s.portForward)
	if s.d.NodeLogDir != "" {
		handle("GET /logs/", "logs", false, nodeLogs(s.d.NodeLogDir).ServeHTTP)
	} else {
		// The kubelet's answer with enableSystemLogHandler false.
		handle("/logs/", "logs", false, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "logs endpoint is disabled.", http.StatusMethodNotAllowed)
		})
	}
	if s.d.Config != nil {
		handle("GET /configz", "configz", false, func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, map[string]any{"kubeletconfig": s.d.Config()})
		})
	}
	handle("GET /stats/summary", "stats", false, s.summary)
	handle("GET /stats/summary/", "stats", false, s.summary)
	prom := promhttp.HandlerFor(s.d.Metrics, promhttp.HandlerOpts{})
	s.mux.Handle("GET /metrics", instrument("metrics", false, func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		if err := metrics.RefreshRuntimeCounts(ctx, s.d.Runtime); err != nil {
			slog.Debug("refreshing running pod and container counts", "err", err)
		}
		cancel()
		prom.ServeHTTP(w, r)
	}))
	resource := metrics.NewResourceRegistry(s.d.Summary)
	s.mux.Handle("GET /metrics/resource", instrument("metrics/resource", false, promhttp.HandlerFor(resource, promhttp.HandlerOpts{}).ServeHTTP))
	s.mux.Handle("GET /metrics/probes", instrument("metrics/probes", false,
		promhttp.HandlerFor(metrics.ProbesRegistry(), promhttp.HandlerOpts{}).ServeHTTP))
	s.mux.Handle("GET /metrics/cadvisor", instrument("metrics/cadvisor", false,
		promhttp.HandlerFor(s.d.Cadvisor, promhttp.HandlerOpts{}).ServeHTTP))
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

func instrument(label string, longRunning bool, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lr := longRunning && (label != "containerLogs" || isTrue(r.URL.Query().Get("follow")))
		done := metrics.ObserveHTTP(metrics.HTTPLabels{Method: r.Method, Path: label, ServerType: "readwrite", LongRunning: lr})
		defer done()
		h(w, r)
	})
}

func isTrue(v string) bool {
	switch strings.ToLower(v) {
	case "1", "true", "t", "yes", "y":
		return true
	}
	return false
}
