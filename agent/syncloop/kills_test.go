package syncloop

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/podworkers"
)

// marker records evictions and how many worker updates had been made when each was marked.
type marker struct {
	w      *fakeWorkers
	marked map[types.UID]string
	before int
}

func (m *marker) MarkEvicted(uid types.UID, msg string) {
	m.marked[uid] = msg
	m.w.mu.Lock()
	m.before = len(m.w.updates)
	m.w.mu.Unlock()
}

// An eviction reaches the pod's worker through the loop: marked evicted first, then killed with
// the eviction's grace period and without deleting the pod. Sending never blocks, even with the
// loop not running.
func TestEvictionsGoThroughTheLoop(t *testing.T) {
	w := &fakeWorkers{}
	ready := true
	l, _, _ := newLoop(w, fakeRuntime{}, &ready)
	m := &marker{w: w, marked: map[types.UID]string{}}
	l.Kills, l.Evicted = NewKills(), m
	a, b := pod("a"), pod("b")
	l.Kills.Evict(a, 1, "The node was low on resource: memory. ")
	l.Kills.Evict(b, 30, "The node had condition: [DiskPressure]. ")
	if got := w.take(); len(got) != 0 {
		t.Fatalf("workers woken before the loop ran: %+v", got)
	}
	never := make(chan time.Time)
	l.iteration(context.Background(), never, never)
	got := w.take()
	if len(got) != 2 || m.marked[a.UID] != "The node was low on resource: memory. " || m.before != 1 {
		t.Fatalf("updates %+v, marked %v (last before update %d)", got, m.marked, m.before)
	}
	for i, want := range []struct {
		pod   *v1.Pod
		grace int64
	}{{a, 1}, {b, 30}} {
		u := got[i]
		if u.UpdateType != podworkers.SyncPodKill || u.Pod != want.pod || !u.Evict || u.GracePeriodOverride == nil || *u.GracePeriodOverride != want.grace {
			t.Errorf("update %d = %+v, want an evicting kill of %s with grace %d", i, u, want.pod.Name, want.grace)
		}
	}
}

type history struct{ kept map[string]bool }

func (h *history) Forget(keep map[string]bool) { h.kept = maps.Clone(keep) }

type listed map[string]bool

func (l listed) Listed() map[string]bool { return maps.Clone(l) }

type resizes struct {
	kept  map[types.UID]bool
	retry []*v1.Pod
}

func (r *resizes) RemoveOrphanedPods(keep map[types.UID]bool) { r.kept = keep }
func (r *resizes) RetryPendingResizes() []*v1.Pod             { return r.retry }

type backOffs struct{ trimmed int }

func (b *backOffs) GC() { b.trimmed++ }

// Housekeeping keeps the events of the pods desired and of those a source lists though they were
// refused; it forgets the allocations of pods gone and syncs the pods whose deferred resize fits.
func TestHousekeepingChores(t *testing.T) {
	w := &fakeWorkers{}
	ready := true
	l, _, _ := newLoop(w, fakeRuntime{}, &ready)
	a := pod("a")
	l.Pods.AddPod(a)
	h, r, b := &history{}, &resizes{retry: []*v1.Pod{a}}, &backOffs{}
	l.Events, l.Listed, l.Resizes, l.BackOffs = h, listed{"ns/refused": true}, r, b
	never := make(chan time.Time)
	hk := make(chan time.Time, 1)
	hk <- time.Now()
	l.iteration(context.Background(), never, hk)
	if keys := slices.Sorted(maps.Keys(h.kept)); !slices.Equal(keys, []string{"ns/a", "ns/refused"}) {
		t.Errorf("events kept for %v", keys)
	}
	if len(r.kept) != 1 || !r.kept[a.UID] || b.trimmed != 1 {
		t.Errorf("allocations kept for %v, back-offs trimmed %d times", r.kept, b.trimmed)
	}
	if got := w.take(); len(got) != 1 || got[0].Pod != a || got[0].UpdateType != podworkers.SyncPodSync {
		t.Errorf("updates %+v, want a sync of the resized pod", got)
	}
}
