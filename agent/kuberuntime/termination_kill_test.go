package kuberuntime

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/test/harness/fakecri"
)

// lockedClock is a fake clock the test moves while the manager's kill goroutines read it; calls
// counts the reads, which tells when every sidecar has begun to wait for its turn.
type lockedClock struct {
	mu    sync.Mutex
	t     time.Time
	calls int
}

func (c *lockedClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	return c.t
}

func (c *lockedClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func (c *lockedClock) reads() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

func (c *lockedClock) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = 0
}

// waitFor polls cond until it holds; the limit guards a hang only.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// sidecarPod runs sidecars side-1 and side-2 and app containers a and b on a fake CRI.
func sidecarPod(t *testing.T, grace int64) (*fakecri.Server, *Manager, *lockedClock, *v1.Pod) {
	cri := fakecri.Start(t)
	cri.AddImage("busybox")
	clock := &lockedClock{t: time.Unix(1_700_000_000, 0)}
	m := NewManager(Deps{Runtime: cri.Runtime(), Images: cri.Images(), RootDir: t.TempDir(), PodLogsDir: t.TempDir(), Now: clock.now})
	pod := orderPod([]string{"side-1", "side-2"}, "a", "b")
	pod.Spec.TerminationGracePeriodSeconds = &grace
	ctx := context.Background()
	for range 5 {
		st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.SyncPod(ctx, pod, st); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"side-1", "side-2", "a", "b"} {
		if cri.RunningContainer(n) == "" {
			t.Fatalf("%s is not running: %q", n, cri.Calls())
		}
	}
	return cri, m, clock, pod
}

// killAsync starts KillPod and returns its outcome; the clock's reads are counted from its start.
func killAsync(t *testing.T, m *Manager, clock *lockedClock, pod *v1.Pod, override *int64) <-chan error {
	st, err := m.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	clock.reset()
	done := make(chan error, 1)
	go func() { done <- m.KillPod(context.Background(), pod, st, override) }()
	return done
}

// TestKillPodStopsSidecarsAfterApps: the app containers are stopped at once with the pod's grace
// period; side-2 only once both have stopped, with what is left of the grace period; side-1 (started
// first) only after side-2, with what is left then.
func TestKillPodStopsSidecarsAfterApps(t *testing.T) {
	cri, m, clock, pod := sidecarPod(t, 30)
	releaseA := cri.HoldStop("a")
	releaseSide2 := cri.HoldStop("side-2")
	t.Cleanup(releaseA)
	t.Cleanup(releaseSide2)
	cri.ResetCalls()
	done := killAsync(t, m, clock, pod, nil)

	stops := func() []string { return cri.CallsWithPrefix("StopContainer") }
	// Both app containers are stopped at once; each sidecar reads the clock as it starts to wait.
	waitFor(t, "the app containers' stops and the sidecars' waits", func() bool { return len(stops()) == 2 && clock.reads() >= 2 })
	if got := slices.Sorted(slices.Values(stops())); !slices.Equal(got, []string{"StopContainer a timeout=30", "StopContainer b timeout=30"}) {
		t.Fatalf("first stops %q", got)
	}
	clock.advance(10 * time.Second) // a takes 10s to stop
	releaseA()
	waitFor(t, "side-2's stop", func() bool { return len(stops()) == 3 })
	if got := stops()[2]; got != "StopContainer side-2 timeout=20" {
		t.Fatalf("third stop %q, want side-2 with the 20s left", got)
	}
	clock.advance(5 * time.Second) // side-2 takes 5s more
	releaseSide2()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := []string{"StopContainer side-2 timeout=20", "StopContainer side-1 timeout=15"}
	if got := stops()[2:]; !slices.Equal(got, want) {
		t.Fatalf("sidecar stops %q, want %q", got, want)
	}
	if got := cri.Calls(); !strings.HasPrefix(got[len(got)-1], "StopPodSandbox") {
		t.Fatalf("calls %q: the sandbox is not stopped last", got)
	}
}

// A sidecar waits for an app container that does not stop only as long as its grace period, then
// is stopped with the kubelet's minimum of 2s, while the app is still stopping.
func TestKillPodSidecarsWaitNoLongerThanTheGracePeriod(t *testing.T) {
	cri, m, clock, pod := sidecarPod(t, 1)
	releaseA := cri.HoldStop("a")
	t.Cleanup(releaseA)
	cri.ResetCalls()
	done := killAsync(t, m, clock, pod, nil)
	stops := func() []string { return cri.CallsWithPrefix("StopContainer") }
	waitFor(t, "the sidecars' stops", func() bool { return len(stops()) == 4 })
	got := stops()
	if !slices.Contains(got[:2], "StopContainer a timeout=2") || !slices.Contains(got[:2], "StopContainer b timeout=2") ||
		!slices.Equal(slices.Sorted(slices.Values(got[2:])), []string{"StopContainer side-1 timeout=2", "StopContainer side-2 timeout=2"}) {
		t.Fatalf("stops %q", got)
	}
	select {
	case err := <-done:
		t.Fatalf("KillPod returned (%v) while a was still stopping", err)
	default:
	}
	releaseA()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A zero grace period (a forced deletion) orders nothing: every container is stopped at once with
// the minimum, as with the kubelet.
func TestKillPodZeroGraceStopsAllAtOnce(t *testing.T) {
	cri, m, clock, pod := sidecarPod(t, 30)
	releaseA := cri.HoldStop("a")
	t.Cleanup(releaseA)
	cri.ResetCalls()
	zero := int64(0)
	done := killAsync(t, m, clock, pod, &zero)
	waitFor(t, "every stop", func() bool { return len(cri.CallsWithPrefix("StopContainer")) == 4 })
	releaseA()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	for _, c := range cri.CallsWithPrefix("StopContainer") {
		if !strings.HasSuffix(c, "timeout=2") {
			t.Fatalf("stop %q", c)
		}
	}
}

// A sidecar's preStop hook runs at once, beside the app containers' stops; only its SIGTERM waits.
func TestKillPodSidecarPreStopDoesNotWait(t *testing.T) {
	cri, m, clock, pod := sidecarPod(t, 30)
	pod.Spec.InitContainers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"drain"}}}}
	releaseA := cri.HoldStop("a")
	t.Cleanup(releaseA)
	cri.ResetCalls()
	done := killAsync(t, m, clock, pod, nil)
	waitFor(t, "side-1's preStop hook", func() bool { return len(cri.CallsWithPrefix("ExecSync side-1")) == 1 })
	for _, c := range cri.CallsWithPrefix("StopContainer") {
		if strings.HasPrefix(c, "StopContainer side-") {
			t.Fatalf("a sidecar was stopped while app a was stopping: %q", cri.Calls())
		}
	}
	releaseA()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	st, err := m.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range st.ContainerStatuses {
		if cs.State == kubecontainer.StateRunning {
			t.Fatalf("%s still running", cs.Name)
		}
	}
}
