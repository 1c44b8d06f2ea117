//go:build cluster

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

func TestClusterMetricsClientsOnNodeletRuntime(t *testing.T) {
	metricsClientsScenario(t, newEnv(t, onNodeletWithNetwork), false)
}

// containerd here has no CNI network: the pod shares the host's, and has no network series.
func TestClusterMetricsClientsOnContainerd(t *testing.T) {
	metricsClientsScenario(t, newEnv(t, onContainerd), true)
}

// metricsClientsScenario: the clients people point at a node read it unchanged. metrics-server
// (registered as the metrics.k8s.io API) scrapes the node's /metrics/resource, so that `kubectl
// top node` and `kubectl top pod` answer; Prometheus, with the Kubernetes service discovery and
// the node-proxy scrape configuration of Prometheus' own Kubernetes example, scrapes
// /metrics/cadvisor and /metrics through the API server and answers the queries of
// kube-prometheus' pod and kubelet dashboards for a pod on the node.
func metricsClientsScenario(t *testing.T, e *env, hostNetwork bool) {
	for _, b := range []string{"metrics-server", "prometheus", "kubectl"} {
		if _, err := os.Stat(filepath.Join(kubeBinDir(), b)); err != nil {
			t.Fatalf("%s missing: build it with hack/kube/build.sh %s, or set KUBE_BIN_DIR", b, b)
		}
	}
	cpDir := filepath.Join(t.TempDir(), "cp")
	os.MkdirAll(cpDir, 0o755)
	admin, p := startControlPlanePKI(t, cpDir)
	client := kubeClient(t, admin)
	ctx := context.Background()
	nodeIP, _ := e.startServingNode(t, admin, p, cpDir, client)

	grace := int64(2)
	// A pod that spends CPU and keeps memory, so its figures are not 0.
	burn := "trap 'exit 0' TERM; dd if=/dev/zero bs=1M count=16 of=/dev/shm/ballast 2>/dev/null; while true; do i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; sleep 0.1; done"
	if _, err := client.CoreV1().Pods("default").Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "busy"},
		Spec: v1.PodSpec{TerminationGracePeriodSeconds: &grace, HostNetwork: hostNetwork, Containers: []v1.Container{{
			Name: "app", Image: e.reg + "/busybox:1", Command: []string{"/bin/sh", "-c", burn}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("pod running", func() bool { return podPhase(ctx, client, "busy") == v1.PodRunning })
	kubectl := func(args ...string) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(cctx, filepath.Join(kubeBinDir(), "kubectl"), append([]string{"--kubeconfig", admin}, args...)...).CombinedOutput()
		return string(out), err
	}

	t.Run("kubectl top through metrics-server", func(t *testing.T) {
		port := startMetricsServer(t, e, admin, cpDir, nodeIP)
		registerMetricsAPI(t, admin, client, nodeIP, port)
		var out string
		// metrics-server gives figures once it has two scrapes of the node, 15 s apart.
		within(t, 3*time.Minute, "kubectl top node", func() bool {
			var err error
			out, err = kubectl("top", "node", "e2e", "--no-headers")
			f := strings.Fields(out)
			return err == nil && len(f) >= 5 && f[0] == "e2e" && strings.HasSuffix(f[1], "m") && strings.HasSuffix(f[3], "Mi")
		})
		t.Logf("kubectl top node: %s", strings.TrimSpace(out))
		defer func() {
			if t.Failed() {
				o, _ := kubectl("top", "pod", "busy")
				r, _ := kubectl("get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/busy")
				m, _ := kubectl("get", "--raw", "/api/v1/nodes/e2e/proxy/metrics/resource")
				t.Logf("kubectl top pod busy: %s\nmetrics.k8s.io: %s\n/metrics/resource:\n%s", o, r, m)
			}
		}()
		within(t, 3*time.Minute, "kubectl top pod", func() bool {
			var err error
			out, err = kubectl("top", "pod", "busy", "--no-headers")
			f := strings.Fields(out)
			return err == nil && len(f) == 3 && f[0] == "busy" && f[1] != "0m" && strings.HasSuffix(f[2], "Mi") && f[2] != "0Mi"
		})
		t.Logf("kubectl top pod: %s", strings.TrimSpace(out))
	})

	t.Run("Prometheus scraping through the API server", func(t *testing.T) {
		prom := startPrometheus(t, admin, cpDir)
		pod := `namespace="default", pod="busy"`
		cadv := `job="kubelet", metrics_path="/metrics/cadvisor"`
		// kube-prometheus' Kubernetes / Compute Resources / Pod dashboard (its recording rules'
		// inner expressions: their join with kube-state-metrics' kube_pod_info is not the node's),
		// and its Kubelet dashboard.
		queries := []string{
			`sum by (container) (irate(container_cpu_usage_seconds_total{` + cadv + `, ` + pod + `, image!=""}[1m]))`,
			`sum by (container) (container_memory_working_set_bytes{` + cadv + `, ` + pod + `, container!="", image!=""})`,
			`sum by (container) (container_memory_rss{` + cadv + `, ` + pod + `, container!="", image!=""})`,
			`sum by (container) (container_memory_cache{` + cadv + `, ` + pod + `, container!="", image!=""})`,
			`sum by (container) (container_spec_cpu_shares{` + cadv + `, ` + pod + `, container!=""})`,
			`sum(kubelet_running_pods{job="kubelet", metrics_path="/metrics"})`,
			`sum(kubelet_running_containers{job="kubelet", metrics_path="/metrics", container_state="running"})`,
			// Over the whole run rather than the dashboard's rate over 5 minutes, which is NaN
			// until a sync happens while Prometheus watches.
			`histogram_quantile(0.99, sum(kubelet_pod_worker_duration_seconds_bucket{job="kubelet", metrics_path="/metrics"}) by (le))`,
			`sum(rate(kubelet_runtime_operations_total{job="kubelet", metrics_path="/metrics"}[5m])) by (operation_type)`,
		}
		if !hostNetwork {
			queries = append(queries,
				`sum by (pod) (irate(container_network_receive_bytes_total{`+cadv+`, `+pod+`}[1m]))`,
				`sum by (pod) (irate(container_network_transmit_packets_total{`+cadv+`, `+pod+`}[1m]))`)
		}
		for _, q := range queries {
			var got string
			within(t, 3*time.Minute, "Prometheus answering "+q, func() bool {
				got = promQuery(prom, q)
				return got != ""
			})
			t.Logf("%s = %s", q, got)
		}
	})
}

// startMetricsServer runs metrics-server on the node's address; it reads the nodes' figures with
// the admin's credentials and checks their serving certificates against the cluster CA.
func startMetricsServer(t *testing.T, e *env, admin, cpDir, ip string) int {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "metrics-server")
	os.MkdirAll(dir, 0o755)
	ports := startOnFreePorts(t, 1, func(ports []int) <-chan struct{} {
		return startProc(t, dir, "metrics-server", "--kubeconfig", admin, "--authentication-kubeconfig", admin,
			"--authorization-kubeconfig", admin, "--bind-address", ip, "--secure-port", strconv.Itoa(ports[0]),
			"--cert-dir", dir, "--kubelet-certificate-authority", filepath.Join(cpDir, "ca.crt"),
			"--kubelet-preferred-address-types", "InternalIP", "--kubelet-use-node-status-port", "--metric-resolution", "15s")
	}, func(ports []int) bool {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(ip, strconv.Itoa(ports[0])), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return ports[0]
}

// registerMetricsAPI makes metrics-server the metrics.k8s.io API as its manifests do, with its
// Service's endpoint at the address it listens on (the aggregator routes to endpoints).
func registerMetricsAPI(t *testing.T, admin string, client kubernetes.Interface, ip string, port int) {
	t.Helper()
	ctx := context.Background()
	if _, err := client.CoreV1().Services("kube-system").Create(ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "metrics-server"},
		Spec: v1.ServiceSpec{Ports: []v1.ServicePort{{Name: "https", Port: 443, TargetPort: intstr.FromInt32(int32(port))}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready, portName, p32 := true, "https", int32(port)
	if _, err := client.DiscoveryV1().EndpointSlices("kube-system").Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "metrics-server-1", Labels: map[string]string{discoveryv1.LabelServiceName: "metrics-server"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &p32}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(restConfig(t, admin))
	if err != nil {
		t.Fatal(err)
	}
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1beta1.metrics.k8s.io"},
		"spec": map[string]any{"group": "metrics.k8s.io", "version": "v1beta1", "insecureSkipTLSVerify": true,
			"groupPriorityMinimum": int64(100), "versionPriority": int64(100),
			"service": map[string]any{"name": "metrics-server", "namespace": "kube-system", "port": int64(443)}},
	}}
	gvr := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	if _, err := dyn.Resource(gvr).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startPrometheus runs Prometheus with the node-proxy scrape jobs of its own Kubernetes example
// (role node; the address rewritten to the API server, the path to the node's proxy), labelled
// as kube-prometheus' kubelet ServiceMonitor labels them (job kubelet, metrics_path), scraping
// every second. It returns Prometheus' base URL.
func startPrometheus(t *testing.T, admin, cpDir string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "prometheus")
	os.MkdirAll(dir, 0o755)
	cfg := restConfig(t, admin)
	server, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	var jobs strings.Builder
	for i, path := range []string{"/metrics/cadvisor", "/metrics"} {
		fmt.Fprintf(&jobs, `- job_name: kubelet-%d
  scrape_interval: 1s
  scheme: https
  tls_config: {ca_file: %q, cert_file: %q, key_file: %q}
  kubernetes_sd_configs:
  - role: node
    kubeconfig_file: %q
  relabel_configs:
  - target_label: __address__
    replacement: %q
  - source_labels: [__meta_kubernetes_node_name]
    regex: (.+)
    target_label: __metrics_path__
    replacement: /api/v1/nodes/$1/proxy%s
  - target_label: job
    replacement: kubelet
  - target_label: metrics_path
    replacement: %s
  - source_labels: [__meta_kubernetes_node_name]
    target_label: node
`, i, filepath.Join(cpDir, "ca.crt"), filepath.Join(cpDir, "admin.crt"), filepath.Join(cpDir, "admin.key"), admin, server.Host, path, path)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte("global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n"+jobs.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var base string
	startOnFreePorts(t, 1, func(ports []int) <-chan struct{} {
		base = "http://127.0.0.1:" + strconv.Itoa(ports[0])
		return startProc(t, dir, "prometheus", "--config.file", filepath.Join(dir, "prometheus.yml"),
			"--storage.tsdb.path", filepath.Join(dir, "data"), "--web.listen-address", "127.0.0.1:"+strconv.Itoa(ports[0]))
	}, func([]int) bool {
		resp, err := http.Get(base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return base
}

// promQuery is the query's first value, "" when Prometheus has none (yet) or fails.
func promQuery(base, q string) string {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  []any             `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if json.Unmarshal(b, &r) != nil || r.Status != "success" || len(r.Data.Result) == 0 || len(r.Data.Result[0].Value) != 2 {
		return ""
	}
	v, _ := r.Data.Result[0].Value[1].(string)
	if v == "NaN" {
		return ""
	}
	return v
}

// within polls cond; the limit guards against a hang and is not a speed assertion.
func within(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
