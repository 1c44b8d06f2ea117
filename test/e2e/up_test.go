package e2e

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodelet/nodelet/test/harness/testimage"
)

// TestUpRunsStaticPods is the embedded default as a person uses it: `nodelet up` on a manifest
// folder, looked at with the client verbs; pods follow the files.
func TestUpRunsStaticPods(t *testing.T) {
	host := testimage.Serve(t, map[string]v1.Image{"library/busybox:up": testimage.MustBusybox()})
	manifests := t.TempDir()
	api := filepath.Join(t.TempDir(), "agent.sock")
	pod := `apiVersion: v1
kind: Pod
metadata: {name: greeter, labels: {app: greeter}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox:up
    command: ["sh", "-c", "echo hello from up; exec sleep 3600"]
`
	if err := os.WriteFile(filepath.Join(manifests, "greeter.yaml"), []byte(pod), 0o644); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, "up", "nle2eup0", "10.252.0.0/24",
		"--manifests", manifests, "--api-socket", api, "--hostname-override", "e2e-node",
		"--pod-logs-dir", filepath.Join(t.TempDir(), "logs"),
		"--registry-mirror", "docker.io=http://"+host)
	client := func(args ...string) (string, error) {
		full := append([]string{args[0], "--agent-endpoint", "unix://" + api}, args[1:]...)
		out, err := exec.Command(nodeletBin, full...).CombinedOutput()
		return string(out), err
	}
	waitFor(t, "the static pod to run", func() bool {
		out, _ := client("get", "pods")
		return strings.Contains(out, "greeter-e2e-node") && strings.Contains(out, "1/1") && strings.Contains(out, "Running")
	})
	waitFor(t, "the pod's log", func() bool {
		out, _ := client("logs", "greeter-e2e-node")
		return strings.Contains(out, "hello from up")
	})
	if out, err := client("exec", "greeter-e2e-node", "--", "cat", "/proc/1/cmdline"); err != nil || !strings.Contains(out, "sleep") {
		t.Fatalf("exec: %v\n%s", err, out)
	}
	if out, err := client("describe", "pod", "greeter-e2e-node"); err != nil || !strings.Contains(out, "10.252.0.") {
		t.Fatalf("describe shows no pod IP from the test network: %v\n%s", err, out)
	}
	// The agent's /metrics has the pod's start in the kubelet's histograms.
	metrics := scrapeMetrics(t, api)
	for _, name := range []string{"kubelet_pod_start_sli_duration_seconds_count", "kubelet_pod_start_duration_seconds_count"} {
		if v := metricValue(metrics, name); v < 1 {
			t.Errorf("%s = %v after a pod started, want >= 1", name, v)
		}
	}
	if v := metricValue(metrics, "kubelet_pleg_relist_duration_seconds_count"); v < 1 {
		t.Errorf("kubelet_pleg_relist_duration_seconds_count = %v, want >= 1", v)
	}

	// The runtime's socket serves crictl too.
	if out := d.crictl(t, "ps", "--name", "main"); !strings.Contains(out, "Running") {
		t.Fatalf("crictl ps:\n%s", out)
	}
	if err := os.Remove(filepath.Join(manifests, "greeter.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the pod to go with its manifest", func() bool {
		out, _ := client("get", "pods")
		ps, _ := d.crictlErr("ps", "-a", "-q")
		pods, _ := d.crictlErr("pods", "-q")
		return !strings.Contains(out, "greeter") && strings.TrimSpace(ps) == "" && strings.TrimSpace(pods) == ""
	})
}

// scrapeMetrics reads /metrics from the agent's API on its unix socket.
func scrapeMetrics(t *testing.T, socket string) string {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	resp, err := c.Get("http://agent/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// metricValue sums the samples of one metric name (all label sets); -1 when absent.
func metricValue(text, name string) float64 {
	total, found := 0.0, false
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			total, found = total+v, true
		}
	}
	if !found {
		return -1
	}
	return total
}
