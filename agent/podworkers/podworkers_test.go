package podworkers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// fakeSyncer records calls; block, when set, holds SyncPod until released.
type fakeSyncer struct {
	mu       sync.Mutex
	calls    []string
	terminal map[types.UID]bool
	block    chan struct{}
	failOnce map[string]bool
	changed  chan struct{}
}

func newFakeSyncer() *fakeSyncer {
	return &fakeSyncer{terminal: map[types.UID]bool{}, failOnce: map[string]bool{}, changed: make(chan struct{}, 100)}
}

func (f *fakeSyncer) rec(s string) error {
	f.mu.Lock()
	f.calls = append(f.calls, s)
	fail := f.failOnce[s]
	delete(f.failOnce, s)
	f.mu.Unlock()
	select {
	case f.changed <- struct{}{}:
	default:
	}
	if fail {
		return fmt.Errorf("injected failure of %s", s)
	}
	return nil
}

func (f *fakeSyncer) SyncPod(ctx context.Context, u UpdateType, pod, _ *v1.Pod) (bool, error) {
	f.mu.Lock()
	block := f.block
	f.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			f.rec("SyncPod cancelled " + pod.Name)
			return false, ctx.Err()
		}
	}
	err := f.rec(fmt.Sprintf("SyncPod %s %s %s", u, pod.Name, pod.Spec.NodeName))
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.terminal[pod.UID], err
}

func (f *fakeSyncer) SyncTerminatingPod(_ context.Context, pod *v1.Pod, g *int64) error {
	gs := "nil"
	if g != nil {
		gs = fmt.Sprint(*g)
	}
	return f.rec("SyncTerminatingPod " + pod.Name + " grace=" + gs)
}

func (f *fakeSyncer) SyncTerminatingRuntimePod(_ context.Context, p *kubecontainer.RuntimePod) error {
	return f.rec("SyncTerminatingRuntimePod " + p.Name)
}

func (f *fakeSyncer) SyncTerminatedPod(_ context.Context, pod *v1.Pod, deleted bool) error {
	return f.rec(fmt.Sprintf("SyncTerminatedPod %s deleted=%v", pod.Name, deleted))
}

func (f *fakeSyncer) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// waitCalls waits until the recorded calls end with want; the timeout only guards against a hang.
func (f *fakeSyncer) waitCalls(t *testing.T, want ...string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		got := f.Calls()
		if len(got) >= len(want) && slices.Equal(got[len(got)-len(want):], want) {
			return
		}
		select {
		case <-f.changed:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("calls %q, want them to end with %q", got, want)
		}
	}
}

func pod(name, node string) *v1.Pod {
	p := &v1.Pod{}
	p.Name, p.UID, p.Spec.NodeName = name, types.UID("uid-"+name), node
	return p
}

func TestLifecycleOfADeletedPod(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFakeSyncer()
	w := New(f, nil, nil)
	stopped := make(chan struct{})
	go func() { w.Run(ctx); close(stopped) }()
	p := pod("a", "n1")
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: p})
	f.waitCalls(t, "SyncPod create a n1")
	g := int64(5)
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: p, GracePeriodOverride: &g})
	f.waitCalls(t, "SyncPod create a n1", "SyncTerminatingPod a grace=5", "SyncTerminatedPod a deleted=true")
	for w.CouldHaveRunningContainers(p.UID) || !w.IsPodKnownFinished(p.UID) {
		time.Sleep(time.Millisecond)
	}
	// Updates after the end are ignored; SyncKnownPods forgets the pod.
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodSync, Pod: p})
	w.SyncKnownPods(map[types.UID]bool{})
	if w.Known(p.UID) {
		t.Fatal("finished pod not forgotten")
	}
	cancel()
	<-stopped
	if got := len(f.Calls()); got != 3 {
		t.Fatalf("calls after the end: %q", f.Calls())
	}
}

func TestUpdatesCoalesceWhileBusy(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFakeSyncer()
	f.block = make(chan struct{})
	w := New(f, nil, nil)
	go w.Run(ctx)
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: pod("a", "n1")})
	for i := 2; i <= 5; i++ {
		w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodUpdate, Pod: pod("a", fmt.Sprintf("n%d", i))})
	}
	close(f.block)
	deadline := time.Now().Add(20 * time.Second)
	for !slices.ContainsFunc(f.Calls(), func(c string) bool { return strings.HasSuffix(c, " a n5") }) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := f.Calls(); len(got) > 2 || !strings.HasSuffix(got[len(got)-1], " a n5") {
		t.Fatalf("updates did not coalesce: %q", got)
	}
}

func TestKillCancelsSyncInFlight(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFakeSyncer()
	f.block = make(chan struct{}) // never released: a pull that hangs
	w := New(f, nil, nil)
	go w.Run(ctx)
	p := pod("a", "n1")
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: p})
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: p})
	f.waitCalls(t, "SyncTerminatingPod a grace=nil", "SyncTerminatedPod a deleted=true")
}

func TestTerminalPodKeepsContainersUntilDeleted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFakeSyncer()
	p := pod("job", "n1")
	f.terminal[p.UID] = true
	w := New(f, nil, nil)
	go w.Run(ctx)
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: p})
	f.waitCalls(t, "SyncPod create job n1", "SyncTerminatingPod job grace=nil", "SyncTerminatedPod job deleted=false")
	for !w.IsPodKnownFinished(p.UID) {
		time.Sleep(time.Millisecond)
	}
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: p}) // a finished pod does not run again
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: p})
	f.waitCalls(t, "SyncTerminatedPod job deleted=true")
}

func TestReAddAfterDeleteGetsFreshWorker(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFakeSyncer()
	w := New(f, nil, nil)
	go w.Run(ctx)
	p := pod("a", "n1")
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: p})
	f.waitCalls(t, "SyncPod create a n1")
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: p})
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: pod("a", "n2")})
	f.waitCalls(t, "SyncTerminatingPod a grace=nil", "SyncTerminatedPod a deleted=true", "SyncPod create a n2")
}

func TestFailedSyncIsRetried(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFakeSyncer()
	f.failOnce["SyncTerminatingRuntimePod orphan"] = true
	w := New(f, nil, nil)
	go w.Run(ctx)
	w.retry = time.Millisecond
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, RunningPod: &kubecontainer.RuntimePod{ID: "uid-orphan", Name: "orphan"}})
	f.waitCalls(t, "SyncTerminatingRuntimePod orphan", "SyncTerminatingRuntimePod orphan")
}

func TestEvictKillStopsPodButKeepsItUntilDeleted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := newFakeSyncer()
	w := New(f, nil, nil)
	go w.Run(ctx)
	p := pod("hog", "n1")
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodCreate, Pod: p})
	f.waitCalls(t, "SyncPod create hog n1")
	g := int64(1)
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: p, GracePeriodOverride: &g, Evict: true})
	f.waitCalls(t, "SyncTerminatingPod hog grace=1", "SyncTerminatedPod hog deleted=false")
	for !w.IsPodKnownFinished(p.UID) {
		time.Sleep(time.Millisecond)
	}
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: p, Evict: true}) // a second eviction changes nothing
	w.UpdatePod(UpdatePodOptions{UpdateType: SyncPodKill, Pod: p})              // deleted from its source
	f.waitCalls(t, "SyncTerminatedPod hog deleted=false", "SyncTerminatedPod hog deleted=true")
}
