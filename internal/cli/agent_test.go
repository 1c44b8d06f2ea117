package cli

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/agent"
	"github.com/nodelet/nodelet/agent/agentconfig"
)

func TestAgentCmdFlags(t *testing.T) {
	cmd := newAgentCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"--container-runtime-endpoint", "--pod-manifest-path", "--manifest-url", "--kubeconfig",
		"--hostname-override", "--node-ip", "--root-dir", "--max-pods", "--config"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("nodelet agent has no %s flag", f)
		}
	}
}

func TestAgentCmdRejectsBadConfig(t *testing.T) {
	cmd := newAgentCmd()
	cmd.SetArgs([]string{"--node-ip=not-an-ip"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "not an IP") {
		t.Fatalf("err %v", err)
	}
}

func TestAgentServesItsAPI(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "manifests"), 0o755)
	os.WriteFile(filepath.Join(dir, "manifests", "web.yaml"), []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: c, image: busybox:1}]}\n"), 0o644)
	cfg := agentconfig.Default()
	cfg.ContainerRuntimeEndpoint = "unix://" + filepath.Join(dir, "no-runtime.sock") // pods wait; the API answers anyway
	cfg.PodManifestPath = filepath.Join(dir, "manifests")
	cfg.RootDir, cfg.PodLogsDir = filepath.Join(dir, "root"), filepath.Join(dir, "logs")
	cfg.HostnameOverride, cfg.HealthzPort, cfg.CgroupRoot = "n1", 0, ""
	a, err := agent.New(cfg, agent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "agent.sock")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runAgent(ctx, a, cfg, sock) }()
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
