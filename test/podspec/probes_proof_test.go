package podspec

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/lifecycle"
	"github.com/nodelet/nodelet/agent/prober"
)

// execRecorder answers exec probes with success and keeps when each came and its timeout.
type execRecorder struct {
	runtimeapi.RuntimeServiceClient // nil: a probe calling anything else fails the test with a panic
	mu                              sync.Mutex
	at                              []time.Time
	timeouts                        []int64
}

func (e *execRecorder) ExecSync(_ context.Context, in *runtimeapi.ExecSyncRequest, _ ...grpc.CallOption) (*runtimeapi.ExecSyncResponse, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.at = append(e.at, time.Now())
	e.timeouts = append(e.timeouts, in.Timeout)
	return &runtimeapi.ExecSyncResponse{}, nil
}

func (e *execRecorder) calls() ([]time.Time, []int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]time.Time(nil), e.at...), append([]int64(nil), e.timeouts...)
}

// probeOnce starts the prober on one running container with the readiness probe p.
func probeOnce(t *testing.T, p *v1.Probe, started time.Time) (*prober.Manager, *execRecorder, *v1.Container) {
	rt := &execRecorder{}
	m := prober.New(rt, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go m.Run(ctx)
	go func() {
		for range m.Updates() {
		}
	}()
	p.Exec = &v1.ExecAction{Command: []string{"true"}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "uid-probe"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", ReadinessProbe: p}}}}
	m.SyncPod(pod, &kubecontainer.PodStatus{ID: pod.UID, ContainerStatuses: []*kubecontainer.Status{
		{ID: "cid", Name: "c", State: kubecontainer.StateRunning, StartedAt: started}}})
	return m, rt, &pod.Spec.Containers[0]
}

// waitFor polls cond until it holds; the deadline only guards a hang.
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

func TestProbeTimingFields(t *testing.T) {
	t.Run("timeoutSeconds", func(t *testing.T) {
		t.Parallel()
		_, rt, _ := probeOnce(t, &v1.Probe{TimeoutSeconds: 7, PeriodSeconds: 1}, time.Now())
		waitFor(t, "a probe", func() bool { at, _ := rt.calls(); return len(at) > 0 })
		if _, timeouts := rt.calls(); timeouts[0] != 7 {
			t.Fatalf("ExecSync timeout %d, want 7", timeouts[0])
		}
	})
	t.Run("initialDelaySeconds", func(t *testing.T) {
		t.Parallel()
		started := time.Now()
		_, rt, _ := probeOnce(t, &v1.Probe{InitialDelaySeconds: 2, PeriodSeconds: 1}, started)
		waitFor(t, "a probe", func() bool { at, _ := rt.calls(); return len(at) > 0 })
		if at, _ := rt.calls(); at[0].Before(started.Add(2 * time.Second)) {
			t.Fatalf("first probe %s after the start, before the initial delay of 2s", at[0].Sub(started))
		}
	})
	t.Run("successThreshold", func(t *testing.T) {
		t.Parallel()
		m, rt, c := probeOnce(t, &v1.Probe{SuccessThreshold: 3, PeriodSeconds: 1}, time.Now())
		waitFor(t, "ready", func() bool { return m.Ready(c, "cid") })
		if at, _ := rt.calls(); len(at) < 3 {
			t.Fatalf("ready after %d successful probes, want 3", len(at))
		}
	})
}

func TestHookFields(t *testing.T) {
	t.Run("httpGet host and scheme", func(t *testing.T) {
		paths := make(chan string, 1)
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { paths <- r.URL.Path }))
		defer srv.Close()
		host, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
		n, _ := strconv.Atoi(port)
		h := &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Host: host, Scheme: v1.URISchemeHTTPS, Port: intstr.FromInt(n), Path: "/hook"}}
		// No pod IP: only the hook's host can be reached.
		r := &lifecycle.Runner{}
		if err := r.Run(context.Background(), lifecycle.Target{ContainerID: "cid", Container: &v1.Container{Name: "c"}}, h); err != nil {
			t.Fatal(err)
		}
		if got := <-paths; got != "/hook" {
			t.Fatalf("server saw %q", got)
		}
	})
	t.Run("sleep seconds", func(t *testing.T) {
		start := time.Now()
		r := &lifecycle.Runner{}
		if err := r.Run(context.Background(), lifecycle.Target{}, &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 1}}); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < time.Second {
			t.Fatalf("slept %s, want 1s", d)
		}
	})
}
