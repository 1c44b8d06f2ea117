package metrics

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"net/http/httptest"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
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
	// The registry is global: compare against what earlier tests (or -count runs) left.
	before := scrape(Registry())
	sli := mustAtoi(t, valueOf(before, "kubelet_pod_start_sli_duration_seconds_count"))
	errs := mustAtoi(t, valueOf(before, `kubelet_runtime_operations_errors_total{operation_type="create_container"}`))
	ObservePodStartSLI(1500 * time.Millisecond)
	SetRunningPods(3)
	ObserveRuntimeOperation("create_container", time.Millisecond, errors.New("x"))
	ObservePLEGRelist(time.Millisecond, time.Second, time.Now())
	text := scrape(Registry())
	for _, want := range []string{
		fmt.Sprintf("kubelet_pod_start_sli_duration_seconds_count %d", sli+1),
		"kubelet_running_pods 3",
		fmt.Sprintf(`kubelet_runtime_operations_errors_total{operation_type="create_container"} %d`, errs+1),
	} {
		if !strings.Contains(text, want) {
			t.Errorf("scrape lacks %q", want)
		}
	}
	mfs, err := Registry().Gather()
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

func TestPodStartTracker(t *testing.T) {
	before := scrape(Registry())
	countOf := func(text, metric string) string {
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, metric+"_count ") {
				return strings.TrimPrefix(l, metric+"_count ")
			}
		}
		return "0"
	}
	base := countOf(before, "kubelet_pod_start_sli_duration_seconds")

	now := time.Unix(1000, 0)
	tr := NewPodStartTracker()
	tr.now = func() time.Time { return now }
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", CreationTimestamp: metav1.NewTime(now.Add(-2 * time.Second))},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}}
	tr.ObservedPod(pod)
	tr.ImagePullStarted("u1")
	now = now.Add(10 * time.Second)
	tr.ImagePullFinished("u1")
	now = now.Add(time.Second)
	pod.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "a", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}
	tr.ObservedPod(pod)
	tr.ObservedPod(pod) // counted once

	// A pod running when first seen (agent restart) is not counted.
	old := pod.DeepCopy()
	old.UID = "u2"
	tr.ObservedPod(old)

	after := scrape(Registry())
	if got, want := countOf(after, "kubelet_pod_start_sli_duration_seconds"), fmt.Sprint(mustAtoi(t, base)+1); got != want {
		t.Fatalf("SLI count %s, want %s", got, want)
	}
	// 2s before first seen + 11s since, minus 10s of pulling: 3s, in the (2,3] bucket.
	if !strings.Contains(after, `kubelet_pod_start_sli_duration_seconds_bucket{le="3"} `+fmt.Sprint(mustAtoi(t, bucket(before, "3"))+1)) {
		t.Fatalf("SLI not in the 3s bucket:\n%s", after)
	}
}

func valueOf(text, series string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, series+" ") {
			return strings.Fields(strings.TrimPrefix(l, series+" "))[0]
		}
	}
	return "0"
}

func bucket(text, le string) string {
	prefix := `kubelet_pod_start_sli_duration_seconds_bucket{le="` + le + `"} `
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return strings.TrimPrefix(l, prefix)
		}
	}
	return "0"
}

func mustAtoi(t *testing.T, s string) int {
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}

func TestEvictedCountsByEvictionSignal(t *testing.T) {
	series := `kubelet_evictions{eviction_signal="nodefs.available"}`
	before := mustAtoi(t, valueOf(scrape(Registry()), series))
	Evicted("nodefs.available")
	Evicted("nodefs.available")
	if got := valueOf(scrape(Registry()), series); got != fmt.Sprint(before+2) {
		t.Errorf("%s = %q, want %d", series, got, before+2)
	}
}

func TestCPUManagerMetrics(t *testing.T) {
	before := mustAtoi(t, valueOf(scrape(Registry()), "kubelet_cpu_manager_pinning_errors_total"))
	CPUPinning(false)
	CPUPinning(true)
	SetCPUPools(3, 1)
	out := scrape(Registry())
	if got := valueOf(out, "kubelet_cpu_manager_pinning_errors_total"); got != fmt.Sprint(before+1) {
		t.Errorf("pinning errors %q, want %d", got, before+1)
	}
	if got := valueOf(out, "kubelet_cpu_manager_shared_pool_size_millicores"); got != "3000" {
		t.Errorf("shared pool %q", got)
	}
	if got := valueOf(out, "kubelet_cpu_manager_exclusive_cpu_allocation_count"); got != "1" {
		t.Errorf("exclusive %q", got)
	}
}

// TestRuntimeCollectors: the registry carries the Go runtime and process metrics that
// collectors.NewGoCollector and collectors.NewProcessCollector give (the package is not linked,
// the collectors are the same).
func TestRuntimeCollectors(t *testing.T) {
	want := prometheus.NewRegistry()
	want.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	wantFamilies, err := want.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got, err := Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range got {
		have[mf.GetName()] = true
	}
	for _, mf := range wantFamilies {
		if !have[mf.GetName()] {
			t.Errorf("registry lacks %s", mf.GetName())
		}
	}
}
