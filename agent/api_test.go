package agent

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodelet/nodelet/agent/agentconfig"
)

// The agent serves its API on the socket its configuration names, even before any runtime answers.
func TestAgentServesItsAPI(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "manifests"), 0o755)
	os.WriteFile(filepath.Join(dir, "manifests", "web.yaml"), []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: c, image: busybox:1}]}\n"), 0o644)
	cfg := agentconfig.Default()
	cfg.Kubelet.ContainerRuntimeEndpoint = "unix://" + filepath.Join(dir, "no-runtime.sock") // pods wait; the API answers anyway
	cfg.Kubelet.StaticPodPath = filepath.Join(dir, "manifests")
	cfg.RootDir, cfg.Kubelet.PodLogsDir = filepath.Join(dir, "root"), filepath.Join(dir, "logs")
	cfg.HostnameOverride, cfg.Kubelet.HealthzPort, cfg.PodsCgroup = "n1", new(int32(0)), ""
	sock := filepath.Join(dir, "agent.sock")
	cfg.APISocket = sock
	a, err := New(cfg, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	var body string
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(body, "web-n1"); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the API never listed the static pod; last body %q", body)
		}
		resp, err := client.Get("http://agent/pods")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// /configz is the running configuration as the kubelet's KubeletConfiguration; /logs/ is the host's
// /var/log unless enableSystemLogHandler turns it off. Both are built by New, so no Run is needed.
func TestAgentConfigzAndNodeLogs(t *testing.T) {
	for _, logsOn := range []bool{true, false} {
		dir := t.TempDir()
		cfg := agentconfig.Default()
		cfg.Kubelet.ContainerRuntimeEndpoint = "unix://" + filepath.Join(dir, "no-runtime.sock")
		cfg.RootDir, cfg.Kubelet.PodLogsDir = filepath.Join(dir, "root"), filepath.Join(dir, "logs")
		cfg.HostnameOverride, cfg.Kubelet.HealthzPort, cfg.PodsCgroup = "n1", new(int32(0)), ""
		cfg.Kubelet.MaxPods, cfg.Kubelet.ClusterDomain = 42, "cluster.example"
		cfg.Kubelet.EnableSystemLogHandler = new(logsOn)
		cfg.APISocket = filepath.Join(dir, "agent.sock")
		if err := agentconfig.Complete(&cfg); err != nil {
			t.Fatal(err)
		}
		a, err := New(cfg, Deps{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.conn.Close() }) // what Run would close
		get := func(path string) (int, []byte) {
			w := httptest.NewRecorder()
			a.api.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://n1"+path, nil))
			return w.Code, w.Body.Bytes()
		}
		code, body := get("/configz")
		var got struct {
			KubeletConfig kubeletv1beta1.KubeletConfiguration `json:"kubeletconfig"`
		}
		if err := json.Unmarshal(body, &got); code != 200 || err != nil {
			t.Fatalf("/configz: %d %v %s", code, err, body)
		}
		if kc := got.KubeletConfig; kc.MaxPods != 42 || kc.ClusterDomain != "cluster.example" ||
			kc.CgroupsPerQOS == nil || *kc.CgroupsPerQOS || *kc.EnableSystemLogHandler != logsOn {
			t.Errorf("/configz: %s", body)
		}
		want := http.StatusOK
		if !logsOn {
			want = http.StatusMethodNotAllowed
		}
		if code, body := get("/logs/"); code != want {
			t.Errorf("/logs/ with enableSystemLogHandler %v: %d %.200s", logsOn, code, body)
		}
	}
}
