package syncloop

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/pleg"
	"github.com/nodelet/nodelet/agent/podmanager"
	"github.com/nodelet/nodelet/agent/podsource"
	"github.com/nodelet/nodelet/agent/podworkers"
	"github.com/nodelet/nodelet/agent/prober"
)

type fakeWorkers struct {
	mu      sync.Mutex
	updates []podworkers.UpdatePodOptions
	known   map[types.UID]bool
}

func (f *fakeWorkers) UpdatePod(o podworkers.UpdatePodOptions) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updates = append(f.updates, o)
}
func (f *fakeWorkers) SyncKnownPods(map[types.UID]bool)            {}
func (f *fakeWorkers) IsPodTerminationRequested(types.UID) bool    { return false }
func (f *fakeWorkers) CouldHaveRunningContainers(u types.UID) bool { return f.known[u] }
func (f *fakeWorkers) take() []podworkers.UpdatePodOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	u := f.updates
	f.updates = nil
	return u
}

type fakeRuntime struct{ pods []*kubecontainer.RuntimePod }

func (f fakeRuntime) GetPods(context.Context) ([]*kubecontainer.RuntimePod, error) {
	return f.pods, nil
}

func pod(name string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}}
}

func newLoop(w *fakeWorkers, rt fakeRuntime, ready *bool) (*SyncLoop, chan podsource.PodUpdate, chan *pleg.PodLifecycleEvent) {
	updates := make(chan podsource.PodUpdate, 10)
	events := make(chan *pleg.PodLifecycleEvent, 10)
	l := New(Deps{Updates: updates, PLEG: events, Pods: podmanager.New(), Workers: w, Runtime: rt,
		SourcesReady: func() bool { return *ready }})
	return l, updates, events
}

func TestRoutesUpdatesAndEvents(t *testing.T) {
	w := &fakeWorkers{}
	ready := true
	l, updates, events := newLoop(w, fakeRuntime{}, &ready)
	never := make(chan time.Time)
	ctx := context.Background()
	step := func() { l.iteration(ctx, never, never) }

	a := pod("a")
	updates <- podsource.PodUpdate{Op: podsource.ADD, Pods: []*v1.Pod{a}}
	step()
	events <- &pleg.PodLifecycleEvent{ID: a.UID, Type: pleg.ContainerDied}
	step()
	events <- &pleg.PodLifecycleEvent{ID: "unknown", Type: pleg.ContainerDied}
	step()
	deleting := a.DeepCopy()
	now, grace := metav1.Now(), int64(7)
	deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = &now, &grace
	updates <- podsource.PodUpdate{Op: podsource.DELETE, Pods: []*v1.Pod{deleting}}
	step()
	updates <- podsource.PodUpdate{Op: podsource.REMOVE, Pods: []*v1.Pod{deleting}}
	step()

	got := w.take()
	want := []podworkers.UpdateType{podworkers.SyncPodCreate, podworkers.SyncPodSync, podworkers.SyncPodKill, podworkers.SyncPodKill}
	if len(got) != len(want) {
		t.Fatalf("updates %+v", got)
	}
	for i := range want {
		if got[i].UpdateType != want[i] {
			t.Errorf("update %d: %v, want %v", i, got[i].UpdateType, want[i])
		}
	}
	if g := got[2].GracePeriodOverride; g == nil || *g != 7 {
		t.Errorf("graceful delete lost its grace period: %v", g)
	}
	if _, ok := l.Pods.GetPodByUID(a.UID); ok {
		t.Error("removed pod still desired")
	}
}

func TestHousekeepingKillsOrphansOnlyOnceSourcesSpoke(t *testing.T) {
	w := &fakeWorkers{known: map[types.UID]bool{"uid-busy": true}}
	rt := fakeRuntime{pods: []*kubecontainer.RuntimePod{{ID: "uid-a"}, {ID: "uid-orphan"}, {ID: "uid-busy"}}}
	ready := false
	l, updates, _ := newLoop(w, rt, &ready)
	never := make(chan time.Time)
	tick := make(chan time.Time, 1)
	ctx := context.Background()
	updates <- podsource.PodUpdate{Op: podsource.ADD, Pods: []*v1.Pod{pod("a")}}
	l.iteration(ctx, never, never)
	w.take()

	tick <- time.Now()
	l.iteration(ctx, never, tick)
	if got := w.take(); len(got) != 0 {
		t.Fatalf("housekeeping acted before every source was seen: %+v", got)
	}
	ready = true
	tick <- time.Now()
	l.iteration(ctx, never, tick)
	got := w.take()
	if len(got) != 1 || got[0].RunningPod == nil || got[0].RunningPod.ID != "uid-orphan" || got[0].UpdateType != podworkers.SyncPodKill {
		t.Fatalf("housekeeping updates %+v, want one kill of uid-orphan", got)
	}
	if err := l.Healthy(); err != nil {
		t.Fatal(err)
	}
}

// A flipped probe result reaches the pod's worker through the loop, like every other wake-up.
func TestProbeUpdateSyncsItsPod(t *testing.T) {
	w := &fakeWorkers{}
	ready := true
	l, updates, _ := newLoop(w, fakeRuntime{}, &ready)
	probes := make(chan prober.Update, 2)
	l.Probes = probes
	never := make(chan time.Time)
	step := func() { l.iteration(context.Background(), never, never) }
	a := pod("a")
	updates <- podsource.PodUpdate{Op: podsource.ADD, Pods: []*v1.Pod{a}}
	step()
	w.take()
	probes <- prober.Update{PodUID: a.UID, Container: "app", Probe: prober.Liveness, Result: prober.Failure}
	step()
	probes <- prober.Update{PodUID: "gone", Container: "app", Probe: prober.Readiness, Result: prober.Success}
	step()
	got := w.take()
	if len(got) != 1 || got[0].UpdateType != podworkers.SyncPodSync || got[0].Pod.UID != a.UID {
		t.Fatalf("updates after probe results: %+v", got)
	}
}

// readinessRecorder records the readiness flips the loop hands the status manager.
type readinessRecorder struct {
	fakeStatuses
	flips []string
}

func (r *readinessRecorder) SetContainerReadiness(uid types.UID, id string, ready bool, _ time.Time) {
	r.flips = append(r.flips, fmt.Sprintf("%s/%s=%v", uid, id, ready))
}

// A readiness flip goes to the status at once, besides waking the pod's worker (which may be busy
// killing the pod); other probes' results only wake the worker.
func TestReadinessFlipReachesTheStatusAtOnce(t *testing.T) {
	w := &fakeWorkers{}
	ready := true
	l, updates, _ := newLoop(w, fakeRuntime{}, &ready)
	rec := &readinessRecorder{fakeStatuses: fakeStatuses{}}
	probes := make(chan prober.Update, 2)
	l.Probes, l.Statuses = probes, rec
	never := make(chan time.Time)
	step := func() { l.iteration(context.Background(), never, never) }
	a := pod("a")
	updates <- podsource.PodUpdate{Op: podsource.ADD, Pods: []*v1.Pod{a}}
	step()
	probes <- prober.Update{PodUID: a.UID, ContainerID: "c1", Probe: prober.Readiness, Result: prober.Failure}
	step()
	probes <- prober.Update{PodUID: a.UID, ContainerID: "c1", Probe: prober.Liveness, Result: prober.Failure}
	step()
	if want := []string{string(a.UID) + "/c1=false"}; !slices.Equal(rec.flips, want) {
		t.Fatalf("readiness flips %q, want %q", rec.flips, want)
	}
}
