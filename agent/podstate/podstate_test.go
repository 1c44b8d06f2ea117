package podstate

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

type phase int

const (
	unknown phase = iota
	syncing
	terminating
	terminated
	finished
)

type fakePhases map[types.UID]phase

func (f fakePhases) IsPodTerminationRequested(u types.UID) bool { return f[u] >= terminating }
func (f fakePhases) CouldHaveRunningContainers(u types.UID) bool {
	return f[u] == syncing || f[u] == terminating
}
func (f fakePhases) IsPodKnownFinished(u types.UID) bool { return f[u] == finished }
func (f fakePhases) Known(u types.UID) bool              { return f[u] != unknown }

type fakePods []*v1.Pod

func (f fakePods) GetPods() []*v1.Pod { return f }
func (f fakePods) GetPodByUID(u types.UID) (*v1.Pod, bool) {
	for _, p := range f {
		if p.UID == u {
			return p, true
		}
	}
	return nil, false
}

func (f fakePods) GetPodByFullName(full string) (*v1.Pod, bool) {
	for _, p := range f {
		if p.Name+"_"+p.Namespace == full {
			return p, true
		}
	}
	return nil, false
}

type fakeStatuses map[types.UID]v1.PodPhase

func (f fakeStatuses) GetPodStatus(u types.UID) (v1.PodStatus, bool) {
	p, ok := f[u]
	return v1.PodStatus{Phase: p}, ok
}

type fakeSources struct {
	listed map[types.UID]bool
	seen   bool
}

func (f fakeSources) Has(u types.UID) bool           { return f.listed[u] }
func (f fakeSources) SeenAllSources(n []string) bool { return f.seen && len(n) == 1 && n[0] == "file" }

func pod(uid string) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: uid}}
}

// Each question is answered from the right source: a pod being killed is no longer active but
// still holds its CPUs; a finished one holds nothing; nothing is gone before the sources spoke.
func TestView(t *testing.T) {
	phases := fakePhases{"run": syncing, "kill": terminating, "done": terminated, "fin": finished, "failed": syncing}
	pods := fakePods{pod("run"), pod("kill"), pod("done"), pod("fin"), pod("failed"), pod("new")}
	statuses := fakeStatuses{"failed": v1.PodFailed, "run": v1.PodRunning}
	sources := fakeSources{listed: map[types.UID]bool{"run": true, "fin": true, "new": true, "done": true}, seen: true}
	v := New(pods, phases, statuses, sources, []string{"file"}, nil)

	var active []string
	for _, p := range v.ActivePods() {
		active = append(active, p.Name)
	}
	if len(active) != 1 || active[0] != "run" {
		t.Errorf("active pods %v, want [run]", active)
	}
	if got := New(pods, phases, statuses, sources, nil, renamed{}).AllocatedPods(); len(got) != 1 || got[0].Name != "run (allocated)" {
		t.Errorf("allocated pods %v, want the active pod as allocated", got)
	}
	for _, c := range []struct {
		name                                string
		uid                                 types.UID
		holds, cleanedUp, gone, mayRun, fin bool
	}{
		{name: "running", uid: "run", holds: true, mayRun: true},
		{name: "being killed", uid: "kill", holds: true, mayRun: true},
		{name: "killed, not finished", uid: "done", holds: true},
		{name: "finished", uid: "fin", cleanedUp: true, fin: true},
		{name: "listed, no worker yet", uid: "new", holds: true, cleanedUp: true},
		{name: "gone everywhere", uid: "old", cleanedUp: true, gone: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := v.HoldsCPUs(string(c.uid)); got != c.holds {
				t.Errorf("HoldsCPUs = %v", got)
			}
			if got := v.PodCleanedUp(c.uid); got != c.cleanedUp {
				t.Errorf("PodCleanedUp = %v", got)
			}
			if got := v.Gone(c.uid); got != c.gone {
				t.Errorf("Gone = %v", got)
			}
			if got := v.CouldHaveRunningContainers(c.uid); got != c.mayRun {
				t.Errorf("CouldHaveRunningContainers = %v", got)
			}
			if got := v.IsPodKnownFinished(c.uid); got != c.fin {
				t.Errorf("IsPodKnownFinished = %v", got)
			}
		})
	}
	if quiet := New(pods, phases, statuses, fakeSources{}, []string{"file"}, nil); quiet.Gone("old") || quiet.SourcesReady() {
		t.Error("a pod counted as gone before every source spoke")
	}
}

// renamed stands for allocations by marking the pods it was given.
type renamed struct{}

func (renamed) AllocatedPods(pods []*v1.Pod) []*v1.Pod {
	var out []*v1.Pod
	for _, p := range pods {
		p = p.DeepCopy()
		p.Name += " (allocated)"
		out = append(out, p)
	}
	return out
}

// The API's pods are copies carrying their kept statuses; a pod with none keeps its own.
func TestViewPodsCarryTheirStatus(t *testing.T) {
	pods := fakePods{pod("run"), pod("new")}
	pods[0].Namespace, pods[1].Namespace = "ns", "ns"
	pods[1].Status.Phase = v1.PodPending
	v := New(pods, fakePhases{}, fakeStatuses{"run": v1.PodRunning}, fakeSources{}, nil, nil)

	got := v.Pods()
	if len(got) != 2 || got[0].Status.Phase != v1.PodRunning || got[1].Status.Phase != v1.PodPending {
		t.Fatalf("pods %v", got)
	}
	got[0].Name = "changed"
	if pods[0].Name != "run" || pods[0].Status.Phase != "" {
		t.Error("the view handed out the desired pod itself")
	}
	if p, ok := v.Pod("ns", "run"); !ok || p.Status.Phase != v1.PodRunning || p == pods[0] {
		t.Errorf("Pod(ns, run) = %v, %v: want a copy with its status", p, ok)
	}
	if _, ok := v.Pod("other", "run"); ok {
		t.Error("Pod found a pod in another namespace")
	}
}
