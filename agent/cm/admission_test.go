package cm

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/admission"
)

func podRequesting(name string, req v1.ResourceList) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: "i", Resources: v1.ResourceRequirements{Requests: req}}}}}
}

// Admission checks requests against allocatable, not capacity: what the reservations keep is not
// handed to pods, and the reasons are the kubelet's words.
func TestAdmissionAgainstAllocatable(t *testing.T) {
	c := fakeV1(t)
	m, err := New(Config{MaxPods: 2, SystemReserved: rl("cpu", "1", "memory", "1Gi"), KubeReserved: rl("memory", "512Mi"),
		HardEvictionThresholds: hard(t, map[string]string{"memory.available": "100Mi"})},
		Deps{Machine: fakeMachine(t), Cgroups: &c})
	if err != nil {
		t.Fatal(err)
	}
	node := admission.LocalNode("n", nil, nil)
	h := admission.New(func() (*v1.Node, error) { return node, nil }, m.Allocatable)
	// 8Gi capacity, 1Gi of it huge pages, 1.6Gi reserved: 5.4Gi (5532Mi) allocatable; 3 of 4 CPUs.
	for _, tc := range []struct {
		name   string
		req    v1.ResourceList
		others int
		reason string
	}{
		{"fits", rl("cpu", "3", "memory", "5532Mi"), 0, ""},
		{"memory within capacity, beyond allocatable", rl("memory", "5533Mi"), 0, "OutOfmemory"},
		{"cpu within capacity, beyond allocatable", rl("cpu", "3500m"), 0, "OutOfcpu"},
		{"pods", rl(), 2, "OutOfpods"},
	} {
		var others []*v1.Pod
		for i := range tc.others {
			others = append(others, podRequesting(string(rune('a'+i)), nil))
		}
		r := h.Admit(podRequesting("p", tc.req), others)
		if (tc.reason == "") != r.Admit || r.Reason != tc.reason {
			t.Errorf("%s: %+v, want reason %q", tc.name, r, tc.reason)
		}
	}
}

// A resize is judged feasible against allocatable before the hard eviction thresholds: room those
// keep may come back, room the reservations keep never does.
func TestAllocatableAbsolute(t *testing.T) {
	c := fakeV1(t)
	m, err := New(Config{MaxPods: 2, SystemReserved: rl("cpu", "1", "memory", "1Gi"), KubeReserved: rl("memory", "512Mi"),
		HardEvictionThresholds: hard(t, map[string]string{"memory.available": "100Mi"})},
		Deps{Machine: fakeMachine(t), Cgroups: &c})
	if err != nil {
		t.Fatal(err)
	}
	abs, alloc := m.AllocatableAbsolute(), m.Allocatable()
	if got := abs.Memory().Value() - alloc.Memory().Value(); got != 100<<20 {
		t.Fatalf("absolute memory exceeds allocatable by %d, want the 100Mi threshold", got)
	}
	if !abs.Cpu().Equal(*alloc.Cpu()) {
		t.Fatalf("cpu %v vs %v: no threshold applies to cpu", abs.Cpu(), alloc.Cpu())
	}
}
