package prober

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

func TestHandlers(t *testing.T) {
	hs := health.NewServer()
	hs.SetServingStatus("up", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	go gs.Serve(gl)
	defer gs.Stop()
	gport := int32(gl.Addr().(*net.TCPAddr).Port)

	var header string
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		header = r.Header.Get("X-Probe")
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/ok", http.StatusFound)
		}
	}))
	defer tlsSrv.Close()
	hport, _ := strconv.Atoi(tlsSrv.URL[strings.LastIndexByte(tlsSrv.URL, ':')+1:])

	str := func(s string) *string { return &s }
	cases := []struct {
		name string
		h    v1.ProbeHandler
		ok   bool
	}{
		{"grpc serving", v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: gport, Service: str("up")}}, true},
		{"grpc overall", v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: gport}}, true},
		{"grpc not serving", v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: gport, Service: str("down")}}, false},
		{"grpc unknown service", v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: gport, Service: str("nope")}}, false},
		{"https self-signed by port name, redirect on the host", v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Scheme: v1.URISchemeHTTPS,
			Port: intstr.FromString("web"), Path: "/moved", HTTPHeaders: []v1.HTTPHeader{{Name: "X-Probe", Value: "1"}}}}, true},
		{"unknown port name", v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromString("nope")}}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Ports: []v1.ContainerPort{{Name: "web", ContainerPort: int32(hport)}}}}}}
			w := &worker{m: New(nil, nil, nil), key: key{container: "app"}, pod: pod, ips: []string{"127.0.0.1"},
				probe: &v1.Probe{ProbeHandler: c.h, TimeoutSeconds: 5}}
			_, err := w.once(context.Background())
			if (err == nil) != c.ok {
				t.Fatalf("probe error %v, want ok %v", err, c.ok)
			}
		})
	}
	if header != "1" {
		t.Fatalf("header %q not sent", header)
	}
}

func TestUnhealthyEventAndProbeGracePeriod(t *testing.T) {
	rec := record.NewFakeRecorder(100)
	m, id, cri := runningManager(t, rec)
	cri.SetExecExitCode(1)
	grace := int64(7)
	c := v1.Container{Name: "app", LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"false"}}},
		PeriodSeconds: 1, FailureThreshold: 1, TerminationGracePeriodSeconds: &grace}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u1"}, Spec: v1.PodSpec{Containers: []v1.Container{c}}}
	if g := m.KillGracePeriod(id); g != nil {
		t.Fatalf("grace period %d before any failure", *g)
	}
	m.SyncPod(pod, &kubecontainer.PodStatus{ID: "u1", ContainerStatuses: []*kubecontainer.Status{{ID: id, Name: "app", State: kubecontainer.StateRunning, StartedAt: time.Now()}}})
	waitFor(t, "liveness failure", func() bool { bad, _ := m.Unhealthy(id); return bad })
	if g := m.KillGracePeriod(id); g == nil || *g != 7 {
		t.Fatalf("kill grace period %v, want 7", g)
	}
	select {
	case e := <-rec.Events:
		if !strings.HasPrefix(e, "Warning Unhealthy Liveness probe failed") {
			t.Fatalf("event %q", e)
		}
	default:
		t.Fatal("no Unhealthy event")
	}
}

func TestSidecarsAreProbed(t *testing.T) {
	m, id, _ := runningManager(t, nil)
	always := v1.ContainerRestartPolicyAlways
	side := v1.Container{Name: "side", RestartPolicy: &always, ReadinessProbe: &v1.Probe{
		ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 1}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u1"}, Spec: v1.PodSpec{
		InitContainers: []v1.Container{side, {Name: "once", ReadinessProbe: side.ReadinessProbe}}, Containers: []v1.Container{{Name: "app"}}}}
	m.SyncPod(pod, &kubecontainer.PodStatus{ID: "u1", ContainerStatuses: []*kubecontainer.Status{
		{ID: id, Name: "side", State: kubecontainer.StateRunning, StartedAt: time.Now()},
		{ID: "other", Name: "once", State: kubecontainer.StateRunning, StartedAt: time.Now()}}})
	waitFor(t, "sidecar ready", func() bool { return m.Ready(&side, id) })
	m.mu.Lock()
	n := len(m.workers)
	m.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d workers; want only the sidecar's", n)
	}
}

// A redirect to another host is not followed and passes with a warning, which the worker reports
// as the kubelet's ProbeWarning event with the start of the answer's body.
func TestRedirectElsewhereIsAProbeWarning(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://0.0.0.0/", http.StatusFound)
	}))
	defer srv.Close()
	port, _ := strconv.Atoi(srv.URL[strings.LastIndexByte(srv.URL, ':')+1:])
	probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/redirect", Port: intstr.FromInt(port)}},
		TimeoutSeconds: 5, PeriodSeconds: 1, FailureThreshold: 1}
	w := &worker{m: New(nil, nil, nil), pod: &v1.Pod{}, ips: []string{"127.0.0.1"}, probe: probe}
	warning, err := w.once(context.Background())
	want := `Probe terminated redirects, Response body: <a href="http://0.0.0.0/">Found</a>.`
	if err != nil || !strings.HasPrefix(warning, want) {
		t.Fatalf("once: %q, %v; want the warning %q", warning, err, want)
	}

	rec := record.NewFakeRecorder(100)
	m, id, _ := runningManager(t, rec)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u1"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", LivenessProbe: probe}}}}
	m.SyncPod(pod, &kubecontainer.PodStatus{ID: "u1", IPs: []string{"127.0.0.1"},
		ContainerStatuses: []*kubecontainer.Status{{ID: id, Name: "app", State: kubecontainer.StateRunning, StartedAt: time.Now()}}})
	e := <-rec.Events
	if !strings.HasPrefix(e, "Warning ProbeWarning Liveness probe warning: "+want) {
		t.Fatalf("event %q", e)
	}
	if bad, _ := m.Unhealthy(id); bad {
		t.Fatal("a redirect elsewhere failed the liveness probe")
	}
}

// Once the startup probe passes, the readiness probe runs at once rather than a period later, as
// the kubelet triggers it (the e2e spec "should be ready immediately after startupProbe succeeds").
func TestReadinessRunsAsSoonAsStarted(t *testing.T) {
	m, id, _ := runningManager(t, nil)
	exec := v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}
	c := v1.Container{Name: "app",
		// The readiness probe's first run finds no startup yet; its next period is an hour away.
		StartupProbe:   &v1.Probe{ProbeHandler: exec, InitialDelaySeconds: 1, PeriodSeconds: 1},
		ReadinessProbe: &v1.Probe{ProbeHandler: exec, PeriodSeconds: 3600}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u1"}, Spec: v1.PodSpec{Containers: []v1.Container{c}}}
	m.SyncPod(pod, &kubecontainer.PodStatus{ID: "u1", ContainerStatuses: []*kubecontainer.Status{
		{ID: id, Name: "app", State: kubecontainer.StateRunning, StartedAt: time.Now()}}})
	waitFor(t, "ready right after the startup probe passed", func() bool { return m.Ready(&c, id) })
}
