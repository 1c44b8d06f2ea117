package cpumanager

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"
)

func TestPodResourcesCPUs(t *testing.T) {
	p := &pods{}
	m, err := New(Config{Policy: PolicyStatic, ReservedSystemCPUs: cpuset.New(2), StateDir: t.TempDir()},
		Deps{Topology: flat(6), Runtime: &fakeRuntime{}, Holds: p.holds})
	if err != nil {
		t.Fatal(err)
	}
	g := pod("g", nil, container("app", "3", "1Gi"), container("helper", "1", "1Gi"))
	b := pod("b", nil, v1.Container{Name: "app", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}}})
	for _, pd := range []*v1.Pod{g, b} {
		p.add(pd)
		if err := m.Admit(pd); err != nil {
			t.Fatal(err)
		}
	}
	// The same CPUs the containers are created on (cpu2 is reserved, cpu5 left shared).
	if m.CPUSet(g, "app") != "0-1,3" || m.CPUSet(g, "helper") != "4" {
		t.Fatalf("app %q helper %q", m.CPUSet(g, "app"), m.CPUSet(g, "helper"))
	}
	for _, tc := range []struct {
		name, pod, container string
		want                 []int64
	}{
		{"exclusive CPUs, ascending, around the reserved one", "g", "app", []int64{0, 1, 3}},
		{"one exclusive CPU", "g", "helper", []int64{4}},
		{"the shared pool is not exclusive", "b", "app", []int64{}},
		{"unknown pod", "x", "app", []int64{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := m.ContainerCPUs(tc.pod, tc.container); !slices.Equal(got, tc.want) {
				t.Errorf("ContainerCPUs = %v, want %v", got, tc.want)
			}
		})
	}
	// Every online CPU but the reserved one, however many are taken now.
	if got := m.AllocatableCPUs(); !slices.Equal(got, []int64{0, 1, 3, 4, 5}) {
		t.Errorf("AllocatableCPUs = %v", got)
	}
}

func TestPodResourcesCPUsNonePolicy(t *testing.T) {
	m, err := New(Config{Policy: PolicyNone, StateDir: t.TempDir()}, Deps{Topology: flat(4)})
	if err != nil {
		t.Fatal(err)
	}
	g := pod("g", nil, container("app", "1", "1Gi"))
	if err := m.Admit(g); err != nil {
		t.Fatal(err)
	}
	if got := m.ContainerCPUs("g", "app"); len(got) != 0 {
		t.Errorf("ContainerCPUs = %v, want none", got)
	}
	if got := m.AllocatableCPUs(); len(got) != 0 {
		t.Errorf("AllocatableCPUs = %v, want none", got)
	}
}
