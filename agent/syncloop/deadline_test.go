package syncloop

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/podsource"
	"github.com/nodelet/nodelet/agent/podworkers"
)

type fakeStatuses map[types.UID]v1.PodStatus

func (fakeStatuses) RemoveOrphanedStatuses(map[types.UID]bool)                {}
func (fakeStatuses) SetContainerReadiness(types.UID, string, bool, time.Time) {}
func (fakeStatuses) SetPodStatus(*v1.Pod, v1.PodStatus) bool                  { return true }
func (f fakeStatuses) GetPodStatus(uid types.UID) (v1.PodStatus, bool) {
	s, ok := f[uid]
	return s, ok
}

// terminatingWorkers says which pods their workers already terminate.
type terminatingWorkers struct {
	*fakeWorkers
	terminating map[types.UID]bool
}

func (w terminatingWorkers) IsPodTerminationRequested(uid types.UID) bool { return w.terminating[uid] }

// A pod whose active deadline passes between two periodic syncs is woken at the next housekeeping
// pass (whether or not every source has been seen), so its worker fails it without waiting for the
// minute's sync.
func TestHousekeepingPassWakesPodsPastTheirDeadline(t *testing.T) {
	now := time.Now()
	ago := func(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(-d)); return &t }
	secs := func(n int64) *int64 { return &n }
	withDeadline := func(name string, deadline int64, apiStart *metav1.Time) *v1.Pod {
		p := pod(name)
		p.Spec.ActiveDeadlineSeconds = secs(deadline)
		p.Status.StartTime = apiStart
		return p
	}
	past := withDeadline("past", 5, nil)                     // started 10s ago as the agent keeps it
	pastAPI := withDeadline("past-api", 5, ago(time.Minute)) // only the apiserver knows its start
	future := withDeadline("future", 60, nil)
	noDeadline := pod("none")
	finished := withDeadline("finished", 5, nil)
	terminating := withDeadline("terminating", 5, nil)
	statuses := fakeStatuses{
		past.UID:        {StartTime: ago(10 * time.Second), Phase: v1.PodRunning},
		future.UID:      {StartTime: ago(10 * time.Second), Phase: v1.PodRunning},
		noDeadline.UID:  {StartTime: ago(time.Hour), Phase: v1.PodRunning},
		finished.UID:    {StartTime: ago(time.Hour), Phase: v1.PodFailed, Reason: "DeadlineExceeded"},
		terminating.UID: {StartTime: ago(time.Hour), Phase: v1.PodRunning},
	}
	w := terminatingWorkers{&fakeWorkers{}, map[types.UID]bool{terminating.UID: true}}
	ready := false
	l, updates, _ := newLoop(w.fakeWorkers, fakeRuntime{}, &ready)
	l.Workers, l.Statuses = w, statuses
	never := make(chan time.Time)
	ctx := context.Background()
	updates <- podsource.PodUpdate{Op: podsource.ADD, Pods: []*v1.Pod{past, pastAPI, future, noDeadline, finished, terminating}}
	l.iteration(ctx, never, never)
	w.take()

	tick := make(chan time.Time, 1)
	tick <- now
	l.iteration(ctx, never, tick)
	got := map[types.UID]podworkers.UpdateType{}
	for _, u := range w.take() {
		got[u.Pod.UID] = u.UpdateType
	}
	want := map[types.UID]podworkers.UpdateType{past.UID: podworkers.SyncPodSync, pastAPI.UID: podworkers.SyncPodSync}
	if len(got) != len(want) || got[past.UID] != want[past.UID] || got[pastAPI.UID] != want[pastAPI.UID] {
		t.Fatalf("woken %v, want %v", got, want)
	}
	tick <- now.Add(time.Minute)
	l.iteration(ctx, never, tick)
	if n := len(w.take()); n != 3 {
		t.Fatalf("a minute later %d pods woken, want 3 (future's deadline passed too)", n)
	}
}
