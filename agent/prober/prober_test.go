package prober

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/recorder"
	"github.com/nodelet/nodelet/test/harness/fakecri"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// waitFor polls cond; the limit guards against a hang only.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// runningManager starts a manager, stopped with the test, over a fake runtime that runs one
// container "app"; it returns the manager, the container's ID and the runtime.
func runningManager(t *testing.T, rec recorder.Interface) (*Manager, string, *fakecri.Server) {
	cri := fakecri.Start(t)
	id := runningContainer(t, cri)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	m := New(cri.Runtime(), rec, nil)
	go m.Run(ctx)
	return m, id, cri
}

func runningContainer(t *testing.T, cri *fakecri.Server) string {
	ctx := context.Background()
	sb, _ := cri.Runtime().RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p"}}})
	c, err := cri.Runtime().CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId,
		SandboxConfig: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p"}},
		Config:        &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, Image: &runtimeapi.ImageSpec{Image: "x"}}})
	if err != nil {
		t.Fatal(err)
	}
	cri.Runtime().StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId})
	return c.ContainerId
}

func TestReadinessAndLiveness(t *testing.T) {
	cri := fakecri.Start(t)
	id := runningContainer(t, cri)
	var healthy atomic.Bool
	healthy.Store(true)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	_, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)

	var changes atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := New(cri.Runtime(), nil, nil)
	go m.Run(ctx)
	go func() {
		for u := range m.Updates() {
			if u.PodUID == "u1" {
				changes.Add(1)
			}
		}
	}()
	c := v1.Container{Name: "app",
		ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Host: "127.0.0.1", Port: intstr.FromInt(port), Path: "/ready"}},
			PeriodSeconds: 1, FailureThreshold: 1},
		LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
			PeriodSeconds: 1, FailureThreshold: 2},
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u1"}, Spec: v1.PodSpec{Containers: []v1.Container{c}}}
	ps := &kubecontainer.PodStatus{ID: "u1", ContainerStatuses: []*kubecontainer.Status{{ID: id, Name: "app", State: kubecontainer.StateRunning, StartedAt: time.Now()}}}

	if m.Ready(&c, id) {
		t.Fatal("ready before the first readiness probe")
	}
	m.SyncPod(pod, ps)
	waitFor(t, "ready", func() bool { return m.Ready(&c, id) })
	healthy.Store(false)
	waitFor(t, "not ready", func() bool { return !m.Ready(&c, id) })
	if bad, _ := m.Unhealthy(id); bad {
		t.Fatal("unhealthy while the liveness probe passes")
	}
	cri.SetExecExitCode(1)
	waitFor(t, "liveness failure", func() bool { bad, _ := m.Unhealthy(id); return bad })
	if changes.Load() < 3 {
		t.Fatalf("%d change notifications", changes.Load())
	}
	m.RemovePod("u1")
	if bad, _ := m.Unhealthy(id); bad {
		t.Fatal("results kept after RemovePod")
	}
}

func TestStartupProbeGatesReadiness(t *testing.T) {
	m, id, _ := runningManager(t, nil)
	port := testutil.FreePort(t) // nothing listens: the startup probe fails
	c := v1.Container{Name: "app",
		StartupProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Host: "127.0.0.1", Port: intstr.FromInt(port)}},
			PeriodSeconds: 1, FailureThreshold: 1}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u1"}, Spec: v1.PodSpec{Containers: []v1.Container{c}}}
	m.SyncPod(pod, &kubecontainer.PodStatus{ID: "u1", ContainerStatuses: []*kubecontainer.Status{{ID: id, Name: "app", State: kubecontainer.StateRunning, StartedAt: time.Now()}}})
	waitFor(t, "startup failure", func() bool { bad, why := m.Unhealthy(id); return bad && why == "failed startup probe" })
	if m.Ready(&c, id) || m.Started(&c, id) {
		t.Fatal("ready or started without passing the startup probe")
	}
}

// A terminating pod keeps its readiness probes (its Services learn it is going) but no liveness
// or startup probe restarts its containers, as the kubelet's StopLivenessAndStartup.
func TestTerminatingKeepsOnlyReadiness(t *testing.T) {
	m, id, _ := runningManager(t, nil)
	exec := v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}}
	c := v1.Container{Name: "app", StartupProbe: &v1.Probe{ProbeHandler: exec, PeriodSeconds: 3600},
		ReadinessProbe: &v1.Probe{ProbeHandler: exec, PeriodSeconds: 3600}, LivenessProbe: &v1.Probe{ProbeHandler: exec, PeriodSeconds: 3600}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u1"}, Spec: v1.PodSpec{Containers: []v1.Container{c}}}
	m.SyncPod(pod, &kubecontainer.PodStatus{ID: "u1", ContainerStatuses: []*kubecontainer.Status{
		{ID: id, Name: "app", State: kubecontainer.StateRunning, StartedAt: time.Now()}}})
	m.StopLivenessAndStartup("u1")
	m.mu.Lock()
	var kinds []ProbeType
	for k := range m.workers {
		kinds = append(kinds, k.probe)
	}
	m.mu.Unlock()
	if len(kinds) != 1 || kinds[0] != Readiness {
		t.Fatalf("workers left %v, want only readiness", kinds)
	}
	m.RemovePod("u1")
	if len(m.workers) != 0 {
		t.Fatal("RemovePod left workers")
	}
}
