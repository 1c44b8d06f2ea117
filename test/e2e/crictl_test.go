package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodelet/nodelet/test/harness/testimage"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// TestCrictlWalkthrough is the README's walk-through, run by crictl against `nodelet runtime`: pull
// an image through a registry mirror, run a pod and a container, look inside, and take it all down.
func TestCrictlWalkthrough(t *testing.T) {
	testutil.Require(t, "crictl")
	host := testimage.Serve(t, map[string]v1.Image{
		"library/busybox:1.36": testimage.MustBusybox(testimage.WithFile("/etc/motd", "hello from nodelet\n", 0o644)),
	})
	d := startRuntime(t, "nle2e0", "10.251.0.0/24", "--registry-mirror", "docker.io=http://"+host)
	dir := t.TempDir()

	d.crictl(t, "pull", "busybox:1.36")
	if out := d.crictl(t, "images"); !strings.Contains(out, "docker.io/library/busybox") || !strings.Contains(out, "1.36") {
		t.Fatalf("crictl images does not list the pulled image:\n%s", out)
	}
	var img struct {
		Status struct {
			RepoTags []string `json:"repoTags"`
		} `json:"status"`
	}
	mustJSON(t, d.crictl(t, "inspecti", "busybox:1.36"), &img)
	if len(img.Status.RepoTags) == 0 || img.Status.RepoTags[0] != "docker.io/library/busybox:1.36" {
		t.Fatalf("inspecti repoTags = %v", img.Status.RepoTags)
	}
	if out := d.crictl(t, "imagefsinfo"); !strings.Contains(out, "usedBytes") {
		t.Fatalf("imagefsinfo:\n%s", out)
	}

	logDir := filepath.Join(dir, "logs")
	pod := writeJSON(t, dir, "pod.json", map[string]any{
		"metadata":      map[string]any{"name": "walk", "namespace": "default", "uid": "walk-uid", "attempt": 0},
		"hostname":      "walker",
		"log_directory": logDir,
		"labels":        map[string]string{"app": "walk"},
		"linux":         map[string]any{},
	})
	ctr := writeJSON(t, dir, "ctr.json", map[string]any{
		"metadata": map[string]any{"name": "talker"},
		"image":    map[string]any{"image": "busybox:1.36"},
		"command":  []string{"sh", "-c", "cat /etc/motd; i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.2; done"},
		"log_path": "talker.log",
		"linux":    map[string]any{},
	})
	podID := strings.TrimSpace(d.crictl(t, "runp", pod))
	ctrID := strings.TrimSpace(d.crictl(t, "create", podID, ctr, pod))
	d.crictl(t, "start", ctrID)

	if out := d.crictl(t, "pods", "--label", "app=walk"); !strings.Contains(out, podID[:13]) || !strings.Contains(out, "Ready") {
		t.Fatalf("crictl pods:\n%s", out)
	}
	if out := d.crictl(t, "ps"); !strings.Contains(out, ctrID[:13]) || !strings.Contains(out, "Running") {
		t.Fatalf("crictl ps:\n%s", out)
	}
	var inspect struct {
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	mustJSON(t, d.crictl(t, "inspect", ctrID), &inspect)
	if inspect.Status.State != "CONTAINER_RUNNING" {
		t.Fatalf("inspect state = %q", inspect.Status.State)
	}
	var podInspect struct {
		Status struct {
			Network struct {
				IP string `json:"ip"`
			} `json:"network"`
		} `json:"status"`
	}
	mustJSON(t, d.crictl(t, "inspectp", podID), &podInspect)
	if !strings.HasPrefix(podInspect.Status.Network.IP, "10.251.0.") {
		t.Fatalf("pod IP %q is not from the test network", podInspect.Status.Network.IP)
	}

	waitFor(t, "the container's log", func() bool {
		out, _ := d.crictlErr("logs", ctrID)
		return strings.Contains(out, "hello from nodelet") && strings.Contains(out, "tick 2")
	})
	if out := d.crictl(t, "exec", "-s", ctrID, "hostname"); strings.TrimSpace(out) != "walker" {
		t.Fatalf("exec hostname = %q", out)
	}
	if out := d.crictl(t, "stats", "--id", ctrID); !strings.Contains(out, "talker") {
		t.Fatalf("crictl stats:\n%s", out)
	}

	d.crictl(t, "stop", "--timeout", "2", ctrID)
	mustJSON(t, d.crictl(t, "inspect", ctrID), &inspect)
	if inspect.Status.State != "CONTAINER_EXITED" {
		t.Fatalf("after stop, state = %q", inspect.Status.State)
	}
	d.crictl(t, "rm", ctrID)
	d.crictl(t, "stopp", podID)
	d.crictl(t, "rmp", podID)
	if out := d.crictl(t, "pods", "-q"); strings.TrimSpace(out) != "" {
		t.Fatalf("pods left: %s", out)
	}
	d.crictl(t, "rmi", "busybox:1.36")
	if out := d.crictl(t, "images", "-q"); strings.TrimSpace(out) != "" {
		t.Fatalf("images left: %s", out)
	}
}

func writeJSON(t *testing.T, dir, name string, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
}

// waitFor polls cond; the bound is generous since it only guards against hanging forever.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
