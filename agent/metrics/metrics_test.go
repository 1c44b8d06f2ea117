package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"net/http/httptest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

func TestOperationName(t *testing.T) {
	for in, want := range map[string]string{
		"/runtime.v1.RuntimeService/RunPodSandbox":       "run_podsandbox",
		"/runtime.v1.RuntimeService/ListPodSandboxStats": "list_podsandbox_stats",
		"/runtime.v1.RuntimeService/CreateContainer":     "create_container",
		"/runtime.v1.ImageService/PullImage":             "pull_image",
		"/runtime.v1.RuntimeService/Status":              "status",
	} {
		if got := OperationName(in); got != want {
			t.Errorf("OperationName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRecorders(t *testing.T) {
	ObservePodStartSLI(1500 * time.Millisecond)
	SetRunningPods(3)
	ObserveRuntimeOperation("create_container", time.Millisecond, errors.New("x"))
	ObservePLEGRelist(time.Millisecond, time.Second, time.Now())
	text := scrape(Registry)
	for _, want := range []string{
		"kubelet_pod_start_sli_duration_seconds_count 1",
		"kubelet_running_pods 3",
		`kubelet_runtime_operations_errors_total{operation_type="create_container"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	mfs, err := Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range mfs {
		names = append(names, mf.GetName())
	}
	all := strings.Join(names, " ")
	for _, want := range []string{"kubelet_pod_start_sli_duration_seconds", "kubelet_running_pods", "kubelet_pleg_relist_duration_seconds", "kubelet_runtime_operations_total", "kubelet_runtime_operations_errors_total", "kubelet_runtime_operations_duration_seconds"} {
		if !strings.Contains(all, want) {
			t.Errorf("registry lacks %s", want)
		}
	}
}

func TestResourceRegistry(t *testing.T) {
	u := func(v uint64) *uint64 { return &v }
	now := metav1.Now()
	sum := &statsapi.Summary{
		Node: statsapi.NodeStats{
			CPU:    &statsapi.CPUStats{Time: now, UsageCoreNanoSeconds: u(2e9)},
			Memory: &statsapi.MemoryStats{Time: now, WorkingSetBytes: u(1 << 20)},
		},
		Pods: []statsapi.PodStats{{
			PodRef: statsapi.PodReference{Name: "web", Namespace: "default"},
			CPU:    &statsapi.CPUStats{Time: now, UsageCoreNanoSeconds: u(1e9)},
			Containers: []statsapi.ContainerStats{{
				Name: "nginx", StartTime: now,
				Memory: &statsapi.MemoryStats{Time: now, WorkingSetBytes: u(4096)},
			}},
		}},
	}
	r := NewResourceRegistry(func(context.Context) (*statsapi.Summary, error) { return sum, nil })
	text := scrape(r)
	for _, want := range []string{
		`container_memory_working_set_bytes{container="nginx",namespace="default",pod="web"} 4096`,
		`pod_cpu_usage_seconds_total{namespace="default",pod="web"} 1`,
		"node_cpu_usage_seconds_total 2",
		"resource_scrape_error 0",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %q:\n%s", want, text)
		}
	}
}

func scrape(g prometheus.Gatherer) string {
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(g, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}
