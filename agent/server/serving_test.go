package server_test

import (
	"encoding/pem"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/agent/agentconfig"
	"github.com/nodelet/nodelet/agent/internal/kubeletconfig"
	"github.com/nodelet/nodelet/agent/server"
	"github.com/nodelet/nodelet/test/harness/apitest"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// NewServing serves what the configuration asks and nothing else: no API without a socket or a
// port, HTTPS standalone only when a port was given, a serving certificate from the cluster only
// in a cluster; /configz and /logs/ follow the configuration.
func TestNewServing(t *testing.T) {
	f := apitest.NewFixture(t)
	d := server.Deps{Pods: f.Pods, Runtime: f.Runtime}
	cfg := func() agentconfig.Config {
		c := agentconfig.Default()
		c.NodeName, c.RootDir = "n1", t.TempDir()
		return c
	}

	none := cfg()
	none.APISocket = ""
	if s, err := server.NewServing(none, nil, d, slog.Default()); s != nil || err != nil {
		t.Fatalf("neither a socket nor a port: %v, %v; want no API", s, err)
	}

	// Standalone HTTPS on a port given, with client certificates checked against a CA.
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: testutil.NewCA(t, "client-ca").Cert.Raw})
	if err := os.WriteFile(caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	https := cfg()
	https.APISocket, https.PortSet, https.Kubelet.Port = "", true, 10250
	https.Kubelet.Authentication.X509.ClientCAFile = caFile
	https.Kubelet.Authorization.Mode = kubeletconfig.KubeletAuthorizationModeAlwaysAllow
	if s, err := server.NewServing(https, nil, d, slog.Default()); s == nil || err != nil {
		t.Fatalf("HTTPS standalone on a port given: %v, %v", s, err)
	}
	https.Kubelet.ServerTLSBootstrap = true
	_, err := server.NewServing(https, nil, d, slog.Default())
	if err == nil || err.Error() != "serverTLSBootstrap (--rotate-server-certificates) needs a cluster (--kubeconfig)" {
		t.Fatalf("serverTLSBootstrap standalone: %v", err)
	}
	https.PortSet = false
	if s, err := server.NewServing(https, nil, d, slog.Default()); s != nil || err != nil {
		t.Fatalf("standalone without a port given: %v, %v; want no API", s, err)
	}

	for _, logsOn := range []bool{true, false} {
		c := cfg()
		c.APISocket = filepath.Join(t.TempDir(), "agent.sock")
		c.Kubelet.MaxPods, c.Kubelet.EnableSystemLogHandler = 42, new(logsOn)
		s, err := server.NewServing(c, nil, d, slog.Default())
		if err != nil || s == nil {
			t.Fatalf("socket only: %v, %v", s, err)
		}
		get := func(path string) (int, string) {
			w := httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://n1"+path, nil))
			return w.Code, w.Body.String()
		}
		if code, body := get("/configz"); code != http.StatusOK || !strings.Contains(body, `"maxPods":42`) {
			t.Errorf("/configz: %d %s", code, body)
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
