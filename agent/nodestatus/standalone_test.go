package nodestatus

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/harness/kubefake"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodelet/nodelet/test/harness/fakecri"
)

type recorded struct {
	ref                  *v1.ObjectReference
	typ, reason, message string
}

type fakeRecorder struct {
	mu     sync.Mutex
	events []recorded
}

func (r *fakeRecorder) Eventf(obj runtime.Object, typ, reason, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref, _ := obj.(*v1.ObjectReference)
	r.events = append(r.events, recorded{ref, typ, reason, fmt.Sprintf(format, args...)})
}

// take returns the reasons recorded since the last take.
func (r *fakeRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, e.reason)
	}
	r.events = nil
	return out
}

func condition(n *v1.Node, t v1.NodeConditionType) (v1.NodeCondition, bool) {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c, true
		}
	}
	return v1.NodeCondition{}, false
}

// clock steps a second each time it is read, so transition times show which build set them.
func clock(m *Manager) {
	t := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m.now = func() time.Time { t = t.Add(time.Second); return t }
}

func TestBuildStandalone(t *testing.T) {
	ctx := context.Background()
	cri := fakecri.Start(t)
	taint := v1.Taint{Key: "example.com/gpu", Value: "yes", Effect: v1.TaintEffectNoSchedule}
	rec := &fakeRecorder{}
	m := New(Deps{Runtime: cri.Runtime(), Images: cri.Images(), NodeName: "n1", NodeIPs: []string{"192.0.2.10"}, MaxPods: 42,
		Labels: map[string]string{"node-role.kubernetes.io/edge": ""}, Taints: []v1.Taint{taint}, Recorder: rec})
	clock(m)
	if _, ok := m.Node(); ok {
		t.Fatal("a node before the first build")
	}
	n := m.Build(ctx)
	for k, v := range map[string]string{"kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux", "node-role.kubernetes.io/edge": ""} {
		if got, ok := n.Labels[k]; !ok || got != v {
			t.Errorf("label %s=%q (%v), want %q", k, got, ok, v)
		}
	}
	if _, ok := n.Labels["kubernetes.io/arch"]; !ok {
		t.Error("no arch label")
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0] != taint || n.CreationTimestamp.IsZero() {
		t.Fatalf("taints %v created %v", n.Spec.Taints, n.CreationTimestamp)
	}
	if p := n.Status.Capacity[v1.ResourcePods]; p.Value() != 42 || n.Status.Addresses[0].Address != "192.0.2.10" ||
		n.Status.NodeInfo.KubeletVersion != AgentVersion || len(n.Status.RuntimeHandlers) == 0 {
		t.Fatalf("status %+v", n.Status)
	}
	// Nothing measures pressure: the node must not claim any.
	if len(n.Status.Conditions) != 1 || n.Status.Conditions[0].Type != v1.NodeReady || n.Status.Conditions[0].Status != v1.ConditionTrue {
		t.Fatalf("conditions without Pressure %+v", n.Status.Conditions)
	}
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("events on the first build %v", got)
	}
	first := n.Status.Conditions[0].LastTransitionTime

	n = m.Build(ctx)
	c, _ := condition(n, v1.NodeReady)
	if !c.LastTransitionTime.Equal(&first) || !c.LastHeartbeatTime.After(first.Time) {
		t.Fatalf("an unchanged Ready moved its transition time: %v → %+v", first, c)
	}
	cri.SetNotReady(true)
	n = m.Build(ctx)
	if c, _ = condition(n, v1.NodeReady); c.Status != v1.ConditionFalse || !c.LastTransitionTime.After(first.Time) {
		t.Fatalf("Ready after the runtime went down %+v", c)
	}
	cri.SetNotReady(false)
	m.Build(ctx)
	if got := fmt.Sprint(rec.take()); got != "[NodeNotReady NodeReady]" {
		t.Fatalf("events %s", got)
	}
	got, ok := m.Node()
	if !ok || got.Name != "n1" {
		t.Fatalf("Node() %v %v", got, ok)
	}
}

func TestPressureConditions(t *testing.T) {
	ctx := context.Background()
	cri := fakecri.Start(t)
	rec := &fakeRecorder{}
	var mu sync.Mutex
	memory := v1.ConditionFalse
	pressure := func() []v1.NodeCondition {
		mu.Lock()
		defer mu.Unlock()
		return []v1.NodeCondition{
			{Type: v1.NodePIDPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
			{Type: v1.NodeMemoryPressure, Status: memory, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
			{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		}
	}
	m := New(Deps{Runtime: cri.Runtime(), NodeName: "n1", MaxPods: 10, Pressure: pressure, Recorder: rec})
	clock(m)
	n := m.Build(ctx)
	var types []v1.NodeConditionType
	for _, c := range n.Status.Conditions {
		types = append(types, c.Type)
	}
	if fmt.Sprint(types) != "[MemoryPressure DiskPressure PIDPressure Ready]" {
		t.Fatalf("conditions %v", types)
	}
	if c, _ := condition(n, v1.NodeMemoryPressure); c.Reason != "KubeletHasSufficientMemory" || c.Message == "" || c.LastHeartbeatTime.IsZero() {
		t.Fatalf("memory pressure %+v", c)
	}
	if got := fmt.Sprint(rec.take()); got != "[NodeHasSufficientMemory NodeHasNoDiskPressure NodeHasSufficientPID]" {
		t.Fatalf("first events %s", got)
	}
	before, _ := condition(n, v1.NodeMemoryPressure)
	mu.Lock()
	memory = v1.ConditionTrue
	mu.Unlock()
	n = m.Build(ctx)
	after, _ := condition(n, v1.NodeMemoryPressure)
	disk, _ := condition(n, v1.NodeDiskPressure)
	if after.Status != v1.ConditionTrue || !after.LastTransitionTime.After(before.LastTransitionTime.Time) ||
		!disk.LastTransitionTime.Equal(&before.LastTransitionTime) {
		t.Fatalf("transition times: memory %+v → %+v, disk %+v", before, after, disk)
	}
	rec.mu.Lock()
	e := rec.events[0]
	rec.mu.Unlock()
	if e.reason != "NodeHasInsufficientMemory" || e.message != "Node n1 status is now: NodeHasInsufficientMemory" ||
		e.ref.Kind != "Node" || e.ref.Name != "n1" || string(e.ref.UID) != "n1" {
		t.Fatalf("event %+v %+v", e, e.ref)
	}
	if got := rec.take(); len(got) != 1 {
		t.Fatalf("events %v", got)
	}
}

func TestClusterNodeEvents(t *testing.T) {
	ctx := context.Background()
	cri := fakecri.Start(t)
	client := fake.NewSimpleClientset()
	rec := &fakeRecorder{}
	m := New(Deps{Client: kubefake.Wrap(client), Runtime: cri.Runtime(), NodeName: "n1", MaxPods: 10, Recorder: rec,
		Pressure: func() []v1.NodeCondition {
			return []v1.NodeCondition{{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse}}
		}})
	// A Node from before the last boot, claiming memory pressure nothing measures any more.
	old := m.initialNode()
	old.Status.NodeInfo.BootID = "an-earlier-boot"
	old.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse},
		{Type: "KernelDeadlock", Status: v1.ConditionFalse}}
	if _, err := client.CoreV1().Nodes().Create(ctx, old, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := m.Register(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(rec.take()); got != "[Rebooted NodeHasNoDiskPressure]" {
		t.Fatalf("events %s", got)
	}
	n, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if _, ok := condition(n, v1.NodeMemoryPressure); ok {
		t.Fatal("a stale MemoryPressure condition stayed")
	}
	if _, ok := condition(n, "KernelDeadlock"); !ok {
		t.Fatal("another component's condition was dropped")
	}
	if local, ok := m.Node(); !ok || local.Status.NodeInfo.BootID != n.Status.NodeInfo.BootID {
		t.Fatal("the posted Node is not the one kept")
	}
}

// With the container manager's Resources, the Node reports its capacity and allocatable apart.
func TestBuildReportsAllocatableApart(t *testing.T) {
	cri := fakecri.Start(t)
	capacity := v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("110")}
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("3500m"), v1.ResourceMemory: resource.MustParse("7Gi"), v1.ResourcePods: resource.MustParse("110")}
	m := New(Deps{Runtime: cri.Runtime(), NodeName: "n1", MaxPods: 110,
		Resources: func() (v1.ResourceList, v1.ResourceList) { return capacity.DeepCopy(), alloc.DeepCopy() }})
	n := m.Build(context.Background())
	if c, a := n.Status.Capacity[v1.ResourceCPU], n.Status.Allocatable[v1.ResourceCPU]; c.String() != "4" || a.String() != "3500m" {
		t.Errorf("cpu capacity %s allocatable %s", c.String(), a.String())
	}
	if a := n.Status.Allocatable[v1.ResourceMemory]; a.String() != "7Gi" {
		t.Errorf("memory allocatable %s", a.String())
	}
}
