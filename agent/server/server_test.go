package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/agent/auth"
	"github.com/nodelet/nodelet/agent/metrics"
	"github.com/nodelet/nodelet/agent/server"
	"github.com/nodelet/nodelet/agent/server/apiclient"
	"github.com/nodelet/nodelet/test/harness/apitest"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

func setup(t *testing.T) (*apitest.Fixture, *apitest.SyncLoop, *apiclient.Client) {
	t.Helper()
	f := apitest.NewFixture(t)
	loop := &apitest.SyncLoop{}
	sock := f.ServeUnix(t, f.Server(loop))
	c, err := apiclient.New("unix://"+sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f, loop, c
}

func get(t *testing.T, c *apiclient.Client, path string) (int, string) {
	t.Helper()
	path, rawQuery, _ := strings.Cut(path, "?")
	q, _ := url.ParseQuery(rawQuery)
	body, err := c.Get(context.Background(), path, q)
	if err != nil {
		var se *apiclient.StatusError
		if errors.As(err, &se) {
			return se.Code, se.Msg
		}
		t.Fatal(err)
	}
	defer body.Close()
	b, _ := io.ReadAll(body)
	return 200, string(b)
}

func TestHealthz(t *testing.T) {
	f, loop, c := setup(t)
	if code, body := get(t, c, "/healthz"); code != 200 || body != "ok" {
		t.Fatalf("healthy: %d %q", code, body)
	}
	loop.Set(errors.New("syncloop last ran 5m ago"))
	if code, body := get(t, c, "/healthz"); code != 500 || !strings.Contains(body, "[-]syncloop failed: syncloop last ran 5m ago") {
		t.Fatalf("stuck syncloop: %d %q", code, body)
	}
	if code, _ := get(t, c, "/healthz/runtime"); code != 200 {
		t.Fatalf("runtime check alone: %d", code)
	}
	loop.Set(nil)
	f.Runtime.SetNotReady(true)
	if code, body := get(t, c, "/healthz"); code != 500 || !strings.Contains(body, "[-]runtime failed") {
		t.Fatalf("runtime down: %d %q", code, body)
	}
	if code, _ := get(t, c, "/healthz/nosuch"); code != 404 {
		t.Fatalf("unknown check: %d", code)
	}
}

func TestPodsAndRunningPods(t *testing.T) {
	f, _, c := setup(t)
	f.AddPod("default", "web", "nginx", "sidecar")
	f.AddPod("kube-system", "dns", "coredns")
	pods, err := c.Pods(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 2 || pods[0].Name != "web" || pods[1].Name != "dns" || pods[0].Status.Phase != v1.PodRunning {
		t.Fatalf("pods: %+v", pods)
	}
	var running v1.PodList
	if err := c.GetJSON(context.Background(), "/runningpods/", nil, &running); err != nil {
		t.Fatal(err)
	}
	if len(running.Items) != 2 || len(running.Items[0].Spec.Containers) != 2 {
		t.Fatalf("running pods: %+v", running.Items)
	}
}

func TestContainerLogs(t *testing.T) {
	f, _, c := setup(t)
	pod := f.AddPod("default", "web", "nginx")
	first := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "nodelet://")
	f.Runtime.WriteLog(first, "stdout F old 1", "stderr F old 2")
	second := f.StartContainer(pod, "nginx")
	f.Runtime.WriteLog(second, "stdout F one", "stdout P tw", "stdout F o", "stderr F three")

	tests := []struct {
		name, query string
		code        int
		want        string
	}{
		{name: "all", want: "one\ntwo\nthree\n", code: 200},
		{name: "tail", query: "?tailLines=1", want: "three\n", code: 200},
		{name: "previous", query: "?previous=true", want: "old 1\nold 2\n", code: 200},
		{name: "limit", query: "?limitBytes=5", want: "one\nt", code: 200},
		{name: "since a while", query: "?sinceSeconds=60", want: "one\ntwo\nthree\n", code: 200},
		{name: "bad tail", query: "?tailLines=-3", code: 400},
		{name: "since twice", query: "?sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z", code: 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, c, "/containerLogs/default/web/nginx"+tc.query)
			if code != tc.code || (code == 200 && body != tc.want) {
				t.Fatalf("%d %q, want %d %q", code, body, tc.code, tc.want)
			}
		})
	}
	if code, _ := get(t, c, "/containerLogs/default/nosuch/nginx"); code != 404 {
		t.Fatalf("unknown pod: %d", code)
	}
	if code, body := get(t, c, "/containerLogs/default/web/nosuch"); code != 400 || !strings.Contains(body, "not valid") {
		t.Fatalf("unknown container: %d %q", code, body)
	}
}

func TestContainerLogsFollowEndsWithContainer(t *testing.T) {
	f, _, c := setup(t)
	pod := f.AddPod("default", "web", "nginx")
	id := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "nodelet://")
	f.Runtime.WriteLog(id, "stdout F before")
	tail := int64(5)
	body, err := c.Logs(context.Background(), "default", "web", "nginx", v1.PodLogOptions{Follow: true, TailLines: &tail})
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	buf := make([]byte, 64)
	n, err := io.ReadAtLeast(body, buf, len("before\n"))
	if err != nil || string(buf[:n]) != "before\n" {
		t.Fatalf("first read %q %v", buf[:n], err)
	}
	f.Runtime.WriteLog(id, "stdout F after")
	n, err = io.ReadAtLeast(body, buf, len("after\n"))
	if err != nil || string(buf[:n]) != "after\n" {
		t.Fatalf("followed read %q %v", buf[:n], err)
	}
	f.Runtime.WriteLog(id, "stdout F last words")
	f.Runtime.Exit(id)
	rest, err := io.ReadAll(body)
	if err != nil || string(rest) != "last words\n" {
		t.Fatalf("after exit %q %v", rest, err)
	}
}

func TestExecAttachPortForwardThroughUnixSocket(t *testing.T) {
	f, _, c := setup(t)
	f.AddPod("default", "web", "nginx")
	ctx := context.Background()

	var out, errOut bytes.Buffer
	if err := c.Exec(ctx, "default", "web", "nginx", []string{"echo", "hi", "there"}, apiclient.StreamOptions{Stdout: &out, Stderr: &errOut}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "hi there\n" {
		t.Fatalf("exec stdout %q", out.String())
	}

	out.Reset()
	if err := c.Exec(ctx, "default", "web", "nginx", []string{"cat"}, apiclient.StreamOptions{Stdin: strings.NewReader("piped"), Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "piped" {
		t.Fatalf("exec stdin %q", out.String())
	}

	errOut.Reset()
	err := c.Exec(ctx, "default", "web", "nginx", []string{"exit", "3"}, apiclient.StreamOptions{Stdout: &out, Stderr: &errOut})
	if code, ok := apiclient.ExitCode(err); !ok || code != 3 {
		t.Fatalf("exit code: %v (%d, %v)", err, code, ok)
	}

	out.Reset()
	if err := c.Attach(ctx, "default", "web", "nginx", apiclient.StreamOptions{Stdin: strings.NewReader("attached"), Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "attached" {
		t.Fatalf("attach %q", out.String())
	}

	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := c.PortForwarder("default", "web", []string{"0:8080"}, nil, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- pf.ForwardPorts() }()
	<-ready
	ports, err := pf.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local))))
	if err != nil {
		t.Fatal(err)
	}
	conn.Write([]byte("ping"))
	got := make([]byte, len("8080:ping"))
	if _, err := io.ReadFull(conn, got); err != nil || string(got) != "8080:ping" {
		t.Fatalf("forwarded %q %v", got, err)
	}
	conn.Close()
	close(stop)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

func TestStatsAndMetrics(t *testing.T) {
	f, _, c := setup(t)
	f.AddPod("default", "web", "nginx")
	var sum statsapi.Summary
	if err := c.GetJSON(context.Background(), "/stats/summary", nil, &sum); err != nil {
		t.Fatal(err)
	}
	if sum.Node.NodeName != "node1" || sum.Node.CPU == nil || len(sum.Pods) != 1 || sum.Pods[0].PodRef.Name != "web" || len(sum.Pods[0].Containers) != 1 {
		t.Fatalf("summary: %+v", sum)
	}
	metrics.ObservePodStartSLI(1)
	_, text := get(t, c, "/metrics")
	for _, want := range []string{"kubelet_pod_start_sli_duration_seconds_bucket", "kubelet_running_pods 1", `kubelet_running_containers{container_state="running"} 1`, "kubelet_http_requests_total{long_running=\"false\",method=\"GET\",path=\"stats\""} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	_, text = get(t, c, "/metrics/resource")
	if !strings.Contains(text, `container_memory_working_set_bytes{container="nginx",namespace="default",pod="web"} 1.2582912e+07`) {
		t.Errorf("/metrics/resource:\n%s", text)
	}
	// No pods' cgroup given: the machine's figures alone.
	if _, text = get(t, c, "/metrics/cadvisor"); !strings.Contains(text, "machine_cpu_cores{") || !strings.Contains(text, "container_scrape_error 0") {
		t.Errorf("/metrics/cadvisor:\n%s", text)
	}
	l := metrics.ProbeLabels{ProbeType: "Readiness", Container: "nginx", Pod: "web", Namespace: "default", PodUID: "web-uid"}
	metrics.ProbeResult(l, "successful", 0.01)
	defer metrics.ForgetProbe(l)
	_, text = get(t, c, "/metrics/probes")
	for _, want := range []string{
		`prober_probe_total{container="nginx",namespace="default",pod="web",pod_uid="web-uid",probe_type="Readiness",result="successful"} 1`,
		`prober_probe_duration_seconds_count{container="nginx",namespace="default",pod="web",probe_type="Readiness"} 1`,
		"process_start_time_seconds ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics/probes lacks %s:\n%s", want, text)
		}
	}
}

// TestTCPNeedsCredentials is `curl -k https://node:10250/exec/...` without a client certificate or
// token: the API must answer 401 on exec and logs, and serve a request with a good certificate.
func TestTCPNeedsCredentials(t *testing.T) {
	f := apitest.NewFixture(t)
	f.AddPod("default", "web", "nginx")
	s := f.Server(nil)
	ca := testutil.NewCA(t, "test-client-ca")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	filter := &auth.Filter{Authn: auth.Union{auth.X509{Roots: ca.Pool()}}, Authz: auth.AlwaysAllow{}, Node: "node1"}
	go func() {
		done <- s.ServeTLSListener(ctx, l, server.TLSOptions{CertDir: t.TempDir(), Hosts: []string{"127.0.0.1"}}, filter)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	base := "https://" + l.Addr().String()
	anon := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for _, tc := range []struct{ method, path string }{
		{"POST", "/exec/default/web/nginx?command=echo&output=1"},
		{"GET", "/exec/default/web/nginx?command=echo&output=1"},
		{"POST", "/attach/default/web/nginx?output=1"},
		{"GET", "/containerLogs/default/web/nginx"},
		{"GET", "/containerLogs/default/web/nginx?follow=true"},
		{"POST", "/portForward/default/web"},
		{"GET", "/pods"},
		{"GET", "/stats/summary"},
	} {
		req, _ := http.NewRequest(tc.method, base+tc.path, nil)
		resp, err := anon.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("anonymous %s %s: %d, want 401", tc.method, tc.path, resp.StatusCode)
		}
	}
	cert := ca.Issue(t, "kube-apiserver-kubelet-client", x509.ExtKeyUsageClientAuth)
	c, err := apiclient.New(base, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Pods(context.Background()); err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
	var out bytes.Buffer
	if err := c.Exec(context.Background(), "default", "web", "nginx", []string{"echo", "tls"}, apiclient.StreamOptions{Stdout: &out}); err != nil || out.String() != "tls\n" {
		t.Fatalf("exec over TLS: %q %v", out.String(), err)
	}
}

func TestServeBoth(t *testing.T) {
	f := apitest.NewFixture(t)
	s := f.Server(nil)
	dir, err := os.MkdirTemp("", "agentapi")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := s.Serve(context.Background(), server.ServeConfig{TCPAddress: "127.0.0.1:0"}); err == nil {
		t.Fatal("TCP without a filter was served")
	}
	ca := testutil.NewCA(t, "test-client-ca")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	sock := filepath.Join(dir, "agent.sock")
	go func() {
		done <- s.Serve(ctx, server.ServeConfig{Socket: sock, TCPAddress: "127.0.0.1:0", TLS: server.TLSOptions{CertDir: dir},
			Filter: &auth.Filter{Authn: auth.X509{Roots: ca.Pool()}, Authz: auth.AlwaysAllow{}}})
	}()
	c, err := apiclient.New("unix://"+sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	for {
		// Serve makes the socket before it returns to us; wait for it without a clock.
		if _, err := os.Stat(sock); err == nil {
			break
		}
		runtime.Gosched()
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", fi, err)
	}
	if _, err := c.Pods(context.Background()); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left after shutdown: %v", err)
	}
}

func TestNodeLogsAndConfigz(t *testing.T) {
	f := apitest.NewFixture(t)
	logDir := t.TempDir()
	os.WriteFile(filepath.Join(logDir, "messages"), []byte("boot ok\n"), 0o644)
	s := server.New(server.Deps{NodeName: "node1", Pods: f.Pods, Runtime: f.Runtime, NodeLogDir: logDir,
		Config: func() any { return map[string]any{"maxPods": 110} }})
	c, err := apiclient.New("unix://"+f.ServeUnix(t, s), nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, c, "/logs/messages"); code != 200 || body != "boot ok\n" {
		t.Fatalf("/logs/messages: %d %q", code, body)
	}
	if code, _ := get(t, c, "/logs/../../etc/passwd"); code == 200 {
		t.Fatal("/logs/ served a file outside its folder")
	}
	if code, body := get(t, c, "/configz"); code != 200 || !strings.Contains(body, `"kubeletconfig":{"maxPods":110}`) {
		t.Fatalf("/configz: %d %q", code, body)
	}
	// Not configured: refused, as the kubelet refuses it with enableSystemLogHandler false.
	_, _, plain := setup(t)
	if code, _ := get(t, plain, "/logs/messages"); code != http.StatusMethodNotAllowed {
		t.Fatalf("/logs/ without NodeLogDir: %d", code)
	}
}
