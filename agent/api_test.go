package agent

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/agent/agentconfig"
)

// The agent serves its API on the socket its configuration names, even before any runtime answers.
func TestAgentServesItsAPI(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "manifests"), 0o755)
	os.WriteFile(filepath.Join(dir, "manifests", "web.yaml"), []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: c, image: busybox:1}]}\n"), 0o644)
	cfg := agentconfig.Default()
	cfg.ContainerRuntimeEndpoint = "unix://" + filepath.Join(dir, "no-runtime.sock") // pods wait; the API answers anyway
	cfg.PodManifestPath = filepath.Join(dir, "manifests")
	cfg.RootDir, cfg.PodLogsDir = filepath.Join(dir, "root"), filepath.Join(dir, "logs")
	cfg.HostnameOverride, cfg.HealthzPort, cfg.CgroupRoot = "n1", 0, ""
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
