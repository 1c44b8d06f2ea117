package allocation

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// res builds requirements from "cpu=100m,memory=64Mi" requests and limits ("" for none).
func res(requests, limits string) v1.ResourceRequirements {
	parse := func(s string) v1.ResourceList {
		if s == "" {
			return nil
		}
		out := v1.ResourceList{}
		for _, kv := range strings.Split(s, ",") {
			k, v, _ := strings.Cut(kv, "=")
			out[v1.ResourceName(k)] = resource.MustParse(v)
		}
		return out
	}
	return v1.ResourceRequirements{Requests: parse(requests), Limits: parse(limits)}
}

func pod(uid string, r ...v1.ResourceRequirements) *v1.Pod {
	p := &v1.Pod{}
	p.Name, p.Namespace, p.UID, p.Generation = "p-"+uid, "default", types.UID(uid), 1
	for i, rr := range r {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: fmt.Sprintf("c%d", i), Image: "busybox", Resources: rr})
	}
	return p
}

func resized(p *v1.Pod, r ...v1.ResourceRequirements) *v1.Pod {
	p = p.DeepCopy()
	p.Generation++
	for i := range r {
		p.Spec.Containers[i].Resources = r[i]
	}
	return p
}

// cpuAdmit admits a pod while the cpu requests of it and others stay within capacity (millicores).
func cpuAdmit(capacity int64) func(*v1.Pod, []*v1.Pod) error {
	return func(p *v1.Pod, others []*v1.Pod) error {
		used := int64(0)
		for _, o := range others {
			r := podRequests(o)
			used += r.Cpu().MilliValue()
		}
		r := podRequests(p)
		want := r.Cpu().MilliValue()
		if want > capacity-used {
			return fmt.Errorf("Node didn't have enough resource: cpu, requested: %d, used: %d, capacity: %d", want, used, capacity)
		}
		return nil
	}
}

func TestDecideResize(t *testing.T) {
	allocatable := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi")}
	burstable := pod("a", res("cpu=100m,memory=64Mi", "cpu=200m,memory=128Mi"))
	guaranteed := pod("g", res("cpu=500m,memory=64Mi", "cpu=500m,memory=64Mi"))
	static := pod("s", res("cpu=100m", ""))
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	other := pod("o", res("cpu=1500m", ""))

	for _, tc := range []struct {
		name       string
		desired    *v1.Pod
		allocated  *v1.Pod
		others     []*v1.Pod
		staticCPU  bool
		wantReason string
		wantMsg    string
	}{
		{name: "fits", desired: resized(burstable, res("cpu=300m,memory=64Mi", "cpu=400m,memory=128Mi")), allocated: burstable},
		{name: "shrink always fits", desired: resized(burstable, res("cpu=50m,memory=64Mi", "cpu=100m,memory=128Mi")),
			allocated: burstable, others: []*v1.Pod{pod("big", res("cpu=1950m", ""))}},
		{name: "not beside the others: deferred with admission's message", desired: resized(burstable, res("cpu=600m,memory=64Mi", "cpu=600m,memory=128Mi")),
			allocated: burstable, others: []*v1.Pod{other}, wantReason: v1.PodReasonDeferred,
			wantMsg: "Node didn't have enough resource: cpu, requested: 600, used: 1500, capacity: 2000"},
		{name: "more cpu than allocatable: infeasible", desired: resized(burstable, res("cpu=3,memory=64Mi", "cpu=3,memory=128Mi")),
			allocated: burstable, wantReason: v1.PodReasonInfeasible,
			wantMsg: "Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000"},
		{name: "more memory than allocatable: infeasible, memory named first", desired: resized(burstable, res("cpu=3,memory=2Gi", "cpu=3,memory=2Gi")),
			allocated: burstable, wantReason: v1.PodReasonInfeasible,
			wantMsg: "Node didn't have enough capacity: memory, requested: 2147483648, capacity: 1073741824"},
		{name: "static pod", desired: resized(static, res("cpu=200m", "")), allocated: static,
			wantReason: v1.PodReasonInfeasible, wantMsg: "In-place resize of static-pods is not supported"},
		{name: "guaranteed cpu under the static cpu policy", desired: resized(guaranteed, res("cpu=1,memory=64Mi", "cpu=1,memory=64Mi")),
			allocated: guaranteed, staticCPU: true, wantReason: v1.PodReasonInfeasible,
			wantMsg: `Resize is infeasible for Guaranteed Pods alongside CPU Manager policy "static"`},
		{name: "guaranteed memory under the static cpu policy", desired: resized(guaranteed, res("cpu=500m,memory=128Mi", "cpu=500m,memory=128Mi")),
			allocated: guaranteed, staticCPU: true},
		{name: "guaranteed cpu without the static policy", desired: resized(guaranteed, res("cpu=1,memory=64Mi", "cpu=1,memory=64Mi")),
			allocated: guaranteed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := decideResize(tc.desired, tc.allocated, tc.others, allocatable, tc.staticCPU, cpuAdmit(2000))
			if d.reason != tc.wantReason || d.message != tc.wantMsg {
				t.Fatalf("decision = %q %q, want %q %q", d.reason, d.message, tc.wantReason, tc.wantMsg)
			}
		})
	}
}

type event struct{ reason, message string }

type fakeRecorder struct{ events []event }

func (r *fakeRecorder) Event(_ runtime.Object, _, reason, message string) {
	r.events = append(r.events, event{reason, message})
}
func (r *fakeRecorder) Eventf(o runtime.Object, t, reason, f string, args ...any) {
	r.Event(o, t, reason, fmt.Sprintf(f, args...))
}
func (r *fakeRecorder) AnnotatedEventf(o runtime.Object, _ map[string]string, t, reason, f string, args ...any) {
	r.Eventf(o, t, reason, f, args...)
}

type fixture struct {
	m      *Manager
	active []*v1.Pod
	rec    *fakeRecorder
}

func newFixture(t *testing.T, dir string) *fixture {
	t.Helper()
	f := &fixture{rec: &fakeRecorder{}}
	m, err := New(Deps{RootDir: dir, Admit: cpuAdmit(1000), ActivePods: func() []*v1.Pod { return f.active },
		Allocatable: func() v1.ResourceList {
			return v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("1Gi")}
		}, Recorder: f.rec, Now: func() time.Time { return time.Unix(1000, 0) }})
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	return f
}

// admit adds the pod as the agent does and makes it active.
func (f *fixture) admit(t *testing.T, p *v1.Pod) {
	t.Helper()
	if err := f.m.AddPod(p, f.active); err != nil {
		t.Fatalf("admit %s: %v", p.UID, err)
	}
	f.active = append(f.active, p)
}

// update replaces the active pod with the same UID, as a config update does.
func (f *fixture) update(p *v1.Pod) {
	for i := range f.active {
		if f.active[i].UID == p.UID {
			f.active[i] = p
		}
	}
}

func conditionSummary(cs []v1.PodCondition) string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s/%s", c.Type, c.Reason))
	}
	return strings.Join(out, " ")
}

func runningStatus(p *v1.Pod) *kubecontainer.PodStatus {
	ps := &kubecontainer.PodStatus{ID: p.UID}
	for _, c := range p.Spec.Containers {
		ps.ContainerStatuses = append(ps.ContainerStatuses, &kubecontainer.Status{ID: "id-" + c.Name, Name: c.Name, State: kubecontainer.StateRunning})
	}
	return ps
}

func TestResizeLifecycle(t *testing.T) {
	f := newFixture(t, t.TempDir())
	a := pod("a", res("cpu=300m", "cpu=300m"))
	b := pod("b", res("cpu=500m", ""))
	f.admit(t, a)
	f.admit(t, b)
	// Containers created: their resources are actuated.
	for _, p := range []*v1.Pod{a, b} {
		if err := f.m.SetActuatedResources(p, &p.Spec.Containers[0]); err != nil {
			t.Fatal(err)
		}
	}

	// Too much beside b: deferred, and the pod keeps its allocation.
	big := resized(a, res("cpu=600m", "cpu=600m"))
	f.update(big)
	got := f.m.HandlePodResourcesResize(big)
	if q := got.Spec.Containers[0].Resources.Requests.Cpu().String(); q != "300m" {
		t.Fatalf("deferred pod synced with cpu %s, want the allocated 300m", q)
	}
	if s := conditionSummary(f.m.PodResizeConditions(a.UID, false)); s != "PodResizePending/Deferred" {
		t.Fatalf("conditions = %q", s)
	}
	if !f.m.HasPendingResizes() {
		t.Fatal("deferred resize not pending")
	}
	// Nothing changed: a retry leaves it deferred.
	if woke := f.m.RetryPendingResizes(); len(woke) != 0 {
		t.Fatalf("retry allocated %v with no room", woke)
	}

	// b goes away: the retry allocates the resize, which is in progress.
	f.active = f.active[:1]
	f.m.RemovePod(b.UID)
	woke := f.m.RetryPendingResizes()
	if len(woke) != 1 || woke[0].UID != a.UID {
		t.Fatalf("retry woke %v, want pod a", woke)
	}
	allocated, differs := f.m.UpdatePodFromAllocation(big)
	if differs || allocated.Spec.Containers[0].Resources.Requests.Cpu().String() != "600m" {
		t.Fatalf("allocation after retry = %v (differs %v)", allocated.Spec.Containers[0].Resources, differs)
	}
	conds := f.m.PodResizeConditions(a.UID, false)
	if s := conditionSummary(conds); s != "PodResizeInProgress/" {
		t.Fatalf("conditions = %q", s)
	}
	if conds[0].ObservedGeneration != big.Generation {
		t.Fatalf("in-progress generation %d, want %d", conds[0].ObservedGeneration, big.Generation)
	}

	// The runtime has not got it yet: still in progress; once actuated, completed with an event.
	f.m.CheckPodResizeInProgress(allocated, runningStatus(allocated))
	if s := conditionSummary(f.m.PodResizeConditions(a.UID, false)); s != "PodResizeInProgress/" {
		t.Fatalf("conditions before actuation = %q", s)
	}
	if err := f.m.SetActuatedResources(allocated, &allocated.Spec.Containers[0]); err != nil {
		t.Fatal(err)
	}
	f.m.CheckPodResizeInProgress(allocated, runningStatus(allocated))
	if s := conditionSummary(f.m.PodResizeConditions(a.UID, false)); s != "" {
		t.Fatalf("conditions after actuation = %q", s)
	}
	if len(f.rec.events) != 1 || f.rec.events[0].reason != "ResizeCompleted" ||
		!strings.HasPrefix(f.rec.events[0].message, `Pod resize completed: {"containers":[{"name":"c0","resources":{"limits":{"cpu":"600m"},"requests":{"cpu":"600m"}}}]}`) {
		t.Fatalf("events = %+v", f.rec.events)
	}

	// Beyond allocatable: infeasible, not retried; reverting the spec clears it.
	huge := resized(big, res("cpu=4", "cpu=4"))
	f.update(huge)
	f.m.HandlePodResourcesResize(huge)
	if s := conditionSummary(f.m.PodResizeConditions(a.UID, false)); s != "PodResizePending/Infeasible" {
		t.Fatalf("conditions = %q", s)
	}
	if f.m.HasPendingResizes() {
		t.Fatal("an infeasible resize is retried")
	}
	f.update(big)
	f.m.HandlePodResourcesResize(big)
	if s := conditionSummary(f.m.PodResizeConditions(a.UID, false)); s != "" {
		t.Fatalf("conditions after revert = %q", s)
	}
	if cs := f.m.PodResizeConditions(a.UID, true); cs != nil {
		t.Fatalf("a finished pod has resize conditions %v", cs)
	}
}

func TestAdmissionCountsAllocations(t *testing.T) {
	f := newFixture(t, t.TempDir())
	a := pod("a", res("cpu=400m", ""))
	f.admit(t, a)
	// a's spec asks 900m, but the resize is deferred: it still holds 400m, and a new pod of 600m fits.
	f.update(resized(a, res("cpu=900m", "")))
	f.admit(t, pod("b", res("cpu=600m", "")))
	// Only 0 m left beside a's allocation.
	if err := f.m.AddPod(pod("c", res("cpu=100m", "")), f.active); err == nil {
		t.Fatal("admitted a pod beyond what allocations leave")
	}
}

func TestCheckpointSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	f := newFixture(t, dir)
	a := pod("a", res("cpu=300m", ""))
	f.admit(t, a)
	big := resized(a, res("cpu=500m", ""))
	f.update(big)
	f.m.HandlePodResourcesResize(big)
	if err := f.m.SetActuatedResources(big, &big.Spec.Containers[0]); err != nil {
		t.Fatal(err)
	}

	// A restarted agent admits the pod again with its spec: it keeps the allocation it had.
	g := newFixture(t, dir)
	if err := g.m.AddPod(big, nil); err != nil {
		t.Fatal(err)
	}
	got, differs := g.m.UpdatePodFromAllocation(big)
	if differs || got.Spec.Containers[0].Resources.Requests.Cpu().String() != "500m" {
		t.Fatalf("allocation after restart = %v", got.Spec.Containers[0].Resources)
	}
	if r, ok := g.m.ActuatedResources(a.UID, "c0"); !ok || r.Requests.Cpu().String() != "500m" {
		t.Fatalf("actuated after restart = %v %v", r, ok)
	}
	g.m.RemoveOrphanedPods(map[types.UID]bool{})
	if _, ok := newFixture(t, dir).m.ActuatedResources(a.UID, "c0"); ok {
		t.Fatal("a removed pod's record came back")
	}
}

func TestCorruptCheckpointStartsAfresh(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, allocatedStateFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, dir)
	f.admit(t, pod("a", res("cpu=100m", "")))
	if _, ok := newFixture(t, dir).m.allocated.pod("a"); !ok {
		t.Fatal("allocation not written over the corrupt checkpoint")
	}
}

func TestAdmitError(t *testing.T) {
	f := newFixture(t, "")
	refused := errors.New("refused")
	f.m.deps.Admit = func(*v1.Pod, []*v1.Pod) error { return refused }
	if err := f.m.AddPod(pod("a"), nil); !errors.Is(err, refused) {
		t.Fatalf("AddPod = %v", err)
	}
	if _, ok := f.m.allocated.pod("a"); ok {
		t.Fatal("a refused pod got an allocation")
	}
}

// Containers an earlier agent made left no record: admission records them as holding their
// allocation, so they are neither resized nor shown in progress for nothing.
func TestAdmissionRecordsContainersWithoutRecord(t *testing.T) {
	f := newFixture(t, t.TempDir())
	a := pod("a", res("cpu=300m", "cpu=300m"))
	f.admit(t, a)
	if r, ok := f.m.ActuatedResources(a.UID, "c0"); !ok || r.Limits.Cpu().String() != "300m" {
		t.Fatalf("actuated after admission = %v %v", r, ok)
	}
	f.m.CheckPodResizeInProgress(a, runningStatus(a))
	if s := conditionSummary(f.m.PodResizeConditions(a.UID, false)); s != "" {
		t.Fatalf("conditions = %q", s)
	}
	// A record kept across a restart wins over the allocation (a resize not yet actuated).
	if err := f.m.SetActuatedResources(a, &v1.Container{Name: "c0", Resources: res("cpu=100m", "cpu=100m")}); err != nil {
		t.Fatal(err)
	}
	g := newFixture(t, f.m.deps.RootDir)
	if err := g.m.AddPod(a, nil); err != nil {
		t.Fatal(err)
	}
	if r, _ := g.m.ActuatedResources(a.UID, "c0"); r.Limits.Cpu().String() != "100m" {
		t.Fatalf("actuated record overwritten at admission: %v", r)
	}
}
