package cpumanager

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/cpuset"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// smt is 2 sockets × 2 cores × 2 threads, numbered as Linux usually does: the second threads of
// all cores after the first ones (cpu0 and cpu4 are one core).
func smt() *Topology {
	t := &Topology{}
	for id := range 8 {
		t.CPUs = append(t.CPUs, CPU{ID: id, Socket: (id % 4) / 2, Core: id % 4})
	}
	return t
}

// flat is n CPUs, one thread per core, one socket.
func flat(n int) *Topology {
	t := &Topology{}
	for id := range n {
		t.CPUs = append(t.CPUs, CPU{ID: id, Core: id})
	}
	return t
}

func TestTake(t *testing.T) {
	for _, tc := range []struct {
		name string
		topo *Topology
		free cpuset.CPUSet
		n    int
		want string
	}{
		{"one CPU packs onto the fullest core", smt(), cpuset.New(1, 2, 3, 4, 5, 6, 7), 1, "4"},
		{"a whole core", smt(), cpuset.New(0, 1, 2, 3, 4, 5, 6, 7), 2, "0,4"},
		{"a whole socket", smt(), cpuset.New(0, 1, 2, 3, 4, 5, 6, 7), 4, "0-1,4-5"},
		{"socket then core", smt(), cpuset.New(0, 1, 2, 3, 4, 5, 6, 7), 6, "0-2,4-6"},
		{"whole core of the fullest socket", smt(), cpuset.New(0, 1, 2, 4, 5, 6), 2, "2,6"},
		{"whole core before a split one", smt(), cpuset.New(1, 2, 5, 6, 7), 2, "1,5"},
		{"flat", flat(4), cpuset.New(1, 2, 3), 2, "1-2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.topo.take(tc.free, tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tc.want {
				t.Errorf("took %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := flat(2).take(cpuset.New(1), 2); err == nil ||
		err.Error() != "not enough cpus available to satisfy request: requested=2, available=1" {
		t.Errorf("error %v", err)
	}
}

func TestReadTopology(t *testing.T) {
	sys := t.TempDir()
	write := func(rel, s string) {
		p := filepath.Join(sys, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("devices/system/cpu/online", "0-1,3")
	for _, c := range []struct{ id, core, socket string }{{"0", "0", "0"}, {"1", "0", "0"}, {"3", "5", "1"}} {
		write("devices/system/cpu/cpu"+c.id+"/topology/core_id", c.core)
		write("devices/system/cpu/cpu"+c.id+"/topology/physical_package_id", c.socket)
	}
	write("devices/system/node/node0/cpulist", "0-1")
	write("devices/system/node/node1/cpulist", "3")
	topo, err := ReadTopology(sys)
	if err != nil {
		t.Fatal(err)
	}
	want := []CPU{{0, 0, 0, 0}, {1, 0, 0, 0}, {3, 5, 1, 1}}
	if !slices.Equal(topo.CPUs, want) {
		t.Errorf("cpus %+v, want %+v", topo.CPUs, want)
	}
	if topo.CPUsPerCore() != 2 || topo.NUMANodes() != 2 || topo.All().String() != "0-1,3" {
		t.Errorf("per core %d, nodes %d, all %s", topo.CPUsPerCore(), topo.NUMANodes(), topo.All())
	}
}

func TestReadTopologyOfThisMachine(t *testing.T) {
	topo, err := ReadTopology("/sys")
	if err != nil {
		t.Fatal(err)
	}
	if topo.All().Size() == 0 {
		t.Fatal("no CPUs")
	}
}

type fakeRuntime struct {
	mu         sync.Mutex
	containers []*runtimeapi.Container
	updates    map[string][]string // container ID → cpusets written
}

func (f *fakeRuntime) ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, _ ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &runtimeapi.ListContainersResponse{Containers: f.containers}, nil
}

func (f *fakeRuntime) UpdateContainerResources(ctx context.Context, in *runtimeapi.UpdateContainerResourcesRequest, _ ...grpc.CallOption) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.updates == nil {
		f.updates = map[string][]string{}
	}
	f.updates[in.GetContainerId()] = append(f.updates[in.GetContainerId()], in.GetLinux().GetCpusetCpus())
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

func (f *fakeRuntime) run(id string, pod *v1.Pod, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.containers = append(f.containers, &runtimeapi.Container{Id: id, State: runtimeapi.ContainerState_CONTAINER_RUNNING,
		Labels: map[string]string{kubecontainer.LabelPodUID: string(pod.UID), kubecontainer.LabelContainerName: name}})
}

func (f *fakeRuntime) written() map[string][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string][]string{}
	for k, v := range f.updates {
		out[k] = slices.Clone(v)
	}
	return out
}

type pods struct {
	mu   sync.Mutex
	list []*v1.Pod
}

func (p *pods) holds(uid string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.ContainsFunc(p.list, func(q *v1.Pod) bool { return string(q.UID) == uid })
}
func (p *pods) add(pod *v1.Pod) { p.mu.Lock(); defer p.mu.Unlock(); p.list = append(p.list, pod) }
func (p *pods) remove(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.list = slices.DeleteFunc(p.list, func(q *v1.Pod) bool { return q.UID == uid })
}

func container(name, cpu, mem string) v1.Container {
	c := v1.Container{Name: name}
	if cpu != "" {
		rl := v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
		c.Resources = v1.ResourceRequirements{Requests: rl, Limits: rl}
	}
	return c
}

func pod(uid string, init []v1.Container, cs ...v1.Container) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Name: uid, Namespace: "default"},
		Spec: v1.PodSpec{InitContainers: init, Containers: cs}}
}

func newStatic(t *testing.T, dir string, topo *Topology, reserved string, rt *fakeRuntime, p *pods, opts map[string]string) (*Manager, error) {
	t.Helper()
	return New(Config{Policy: PolicyStatic, ReservedCPU: resource.MustParse(reserved), StateDir: dir, Options: opts},
		Deps{Topology: topo, Runtime: rt, Holds: p.holds})
}

func TestStaticPolicy(t *testing.T) {
	dir := t.TempDir()
	rt, p := &fakeRuntime{}, &pods{}
	m, err := newStatic(t, dir, smt(), "500m", rt, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Reserved().String() != "0" {
		t.Fatalf("reserved %s, want 0", m.Reserved())
	}
	burstable := pod("b", nil, v1.Container{Name: "app", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}}})
	fractional := pod("f", nil, container("app", "1500m", "1Gi"))
	g := pod("g", nil, container("app", "2", "1Gi"), container("helper", "1", "1Gi"))
	for _, pd := range []*v1.Pod{burstable, fractional, g} {
		p.add(pd) // a source lists a pod before it is admitted
		if err := m.Admit(pd); err != nil {
			t.Fatalf("%s: %v", pd.Name, err)
		}
	}
	// cpu0 is reserved, so its core's sibling cpu4 is the fullest core left: the 2-CPU
	// container gets the whole free core 1 and the 1-CPU one packs onto cpu4.
	if got := m.CPUSet(g, "app"); got != "1,5" {
		t.Errorf("app: %q", got)
	}
	if got := m.CPUSet(g, "helper"); got != "4" {
		t.Errorf("helper: %q", got)
	}
	for _, pd := range []*v1.Pod{burstable, fractional} {
		if got := m.CPUSet(pd, "app"); got != "0,2-3,6-7" {
			t.Errorf("%s runs on %q, want the shared pool", pd.Name, got)
		}
	}

	// A pod that does not fit takes nothing.
	big := pod("big", nil, container("a", "2", "1Gi"), container("b", "4", "1Gi"))
	err = m.Admit(big)
	var ae *AdmitError
	if !asAdmit(err, &ae) || ae.Reason != "UnexpectedAdmissionError" ||
		ae.Message != "Allocate failed due to not enough cpus available to satisfy request: requested=4, available=2, which is unexpected" {
		t.Fatalf("admit: %v", err)
	}
	if got := m.SharedPool().String(); got != "0,2-3,6-7" {
		t.Errorf("a refused pod kept CPUs: shared %q", got)
	}

	// A restarted agent finds the same assignments.
	m2, err := newStatic(t, dir, smt(), "500m", rt, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := m2.CPUSet(g, "app"); got != "1,5" {
		t.Errorf("after restart app: %q", got)
	}
	if err := m2.Admit(g); err != nil || m2.CPUSet(g, "helper") != "4" {
		t.Errorf("re-admission after restart: %v, helper %q", err, m2.CPUSet(g, "helper"))
	}

	// The pod ends: its CPUs go back to the pool.
	p.remove(g.UID)
	m2.Reconcile(context.Background())
	if got := m2.SharedPool().String(); got != "0-7" {
		t.Errorf("shared pool %q after the pod ended", got)
	}
}

func asAdmit(err error, target **AdmitError) bool {
	ae, ok := err.(*AdmitError)
	*target = ae
	return ok
}

func TestInitContainerCPUsAreReused(t *testing.T) {
	p := &pods{}
	m, err := newStatic(t, t.TempDir(), flat(4), "1", &fakeRuntime{}, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	always := v1.ContainerRestartPolicyAlways
	sidecar := container("sidecar", "1", "1Gi")
	sidecar.RestartPolicy = &always
	pd := pod("p", []v1.Container{container("init", "2", "1Gi"), sidecar}, container("app", "2", "1Gi"))
	p.add(pd)
	if err := m.Admit(pd); err != nil {
		t.Fatal(err)
	}
	// Three CPUs are free. init ends before the sidecar starts, so both may use cpu1; the
	// sidecar then runs beside app, so app gets init's other CPU and the last free one.
	if m.CPUSet(pd, "init") != "1-2" || m.CPUSet(pd, "sidecar") != "1" || m.CPUSet(pd, "app") != "2-3" {
		t.Errorf("init %q sidecar %q app %q", m.CPUSet(pd, "init"), m.CPUSet(pd, "sidecar"), m.CPUSet(pd, "app"))
	}
	p.remove(pd.UID)
	m.Reconcile(context.Background())
	if got := m.SharedPool().String(); got != "0-3" {
		t.Errorf("shared %q", got)
	}
}

func TestFullPCPUsOnly(t *testing.T) {
	m, err := newStatic(t, t.TempDir(), smt(), "1", &fakeRuntime{}, &pods{}, map[string]string{OptionFullPCPUsOnly: "true"})
	if err != nil {
		t.Fatal(err)
	}
	var ae *AdmitError
	if err := m.Admit(pod("odd", nil, container("a", "1", "1Gi"))); !asAdmit(err, &ae) || ae.Reason != ReasonSMTAlignment ||
		ae.Message != "SMT Alignment Error: requested 1 cpus not multiple cpus per core = 2" {
		t.Fatalf("odd request: %v", err)
	}
	// cpu0 is reserved, so its sibling cpu4 is not a whole core: 3 free cores, 6 CPUs.
	if err := m.Admit(pod("big", nil, container("a", "8", "1Gi"))); !asAdmit(err, &ae) ||
		ae.Message != "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = 6, requested CPUs = 8, CPUs per core = 2" {
		t.Fatalf("big request: %v", err)
	}
	pd := pod("ok", nil, container("a", "2", "1Gi"))
	if err := m.Admit(pd); err != nil || m.CPUSet(pd, "a") != "1,5" {
		t.Fatalf("%v, %q", err, m.CPUSet(pd, "a"))
	}
}

func TestStaticRefusals(t *testing.T) {
	dir := t.TempDir()
	if _, err := newStatic(t, dir, flat(2), "0", &fakeRuntime{}, &pods{}, nil); err == nil ||
		!strings.Contains(err.Error(), "requires systemreserved.cpu + kubereserved.cpu to be greater than zero") {
		t.Errorf("no reservation: %v", err)
	}
	if _, err := newStatic(t, dir, flat(2), "1", &fakeRuntime{}, &pods{}, map[string]string{"distribute-cpus-across-numa": "true"}); err == nil {
		t.Error("an unknown option was accepted")
	}
	if _, err := New(Config{Policy: PolicyStatic, ReservedSystemCPUs: cpuset.New(5), StateDir: dir},
		Deps{Topology: flat(2), Holds: (&pods{}).holds}); err == nil {
		t.Error("a reserved CPU that is not online was accepted")
	}
	// none wrote its checkpoint; static must not take it over.
	if _, err := New(Config{Policy: PolicyNone, StateDir: dir}, Deps{Topology: flat(2)}); err != nil {
		t.Fatal(err)
	}
	_, err := newStatic(t, dir, flat(2), "1", &fakeRuntime{}, &pods{}, nil)
	if want := `could not restore state from checkpoint: configured policy "static" differs from state checkpoint policy "none", please drain this node and delete the CPU manager checkpoint file "` +
		filepath.Join(dir, StateFile) + `" before restarting Kubelet`; err == nil || err.Error() != want {
		t.Errorf("policy change: %v", err)
	}
	// A static checkpoint of a machine with other CPUs.
	dir = t.TempDir()
	st := newState(PolicyStatic)
	st.defaultSet = cpuset.New(0, 1, 2)
	if err := st.write(filepath.Join(dir, StateFile)); err != nil {
		t.Fatal(err)
	}
	if _, err := newStatic(t, dir, flat(2), "1", &fakeRuntime{}, &pods{}, nil); err == nil ||
		!strings.Contains(err.Error(), `current set of available CPUs "0-1" doesn't match with CPUs in state "0-2"`) {
		t.Errorf("other CPUs: %v", err)
	}
}

func TestReconcileFollowsTheSharedPool(t *testing.T) {
	rt, p := &fakeRuntime{}, &pods{}
	m, err := New(Config{Policy: PolicyStatic, ReservedSystemCPUs: cpuset.New(0), StateDir: t.TempDir()},
		Deps{Topology: flat(4), Runtime: rt, Holds: p.holds})
	if err != nil {
		t.Fatal(err)
	}
	shared := pod("s", nil, container("app", "", ""))
	p.add(shared)
	if err := m.Admit(shared); err != nil {
		t.Fatal(err)
	}
	rt.run("c-shared", shared, "app")
	m.Created("c-shared", m.CPUSet(shared, "app"))
	m.Reconcile(context.Background())
	if len(rt.written()) != 0 {
		t.Fatalf("a container created with the right cpuset was updated: %v", rt.written())
	}

	g := pod("g", nil, container("app", "2", "1Gi"))
	p.add(g)
	if err := m.Admit(g); err != nil {
		t.Fatal(err)
	}
	rt.run("c-g", g, "app")
	m.Reconcile(context.Background())
	m.Reconcile(context.Background())
	want := map[string][]string{"c-shared": {"0,3"}, "c-g": {"1-2"}}
	if got := rt.written(); !equalUpdates(got, want) {
		t.Errorf("updates %v, want %v", got, want)
	}
	p.remove(g.UID)
	m.Reconcile(context.Background())
	if got := rt.written()["c-shared"]; !slices.Equal(got, []string{"0,3", "0-3"}) {
		t.Errorf("shared container's cpusets %v", got)
	}
}

func equalUpdates(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func TestNonePolicy(t *testing.T) {
	dir := t.TempDir()
	m, err := New(Config{Policy: PolicyNone, StateDir: dir}, Deps{Topology: flat(2)})
	if err != nil {
		t.Fatal(err)
	}
	g := pod("g", nil, container("app", "1", "1Gi"))
	if err := m.Admit(g); err != nil || m.CPUSet(g, "app") != "" {
		t.Errorf("none: %v %q", err, m.CPUSet(g, "app"))
	}
	b, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil || !strings.Contains(string(b), `"policyName":"none"`) {
		t.Errorf("checkpoint %s, %v", b, err)
	}
	if _, err := New(Config{Policy: "best"}, Deps{Topology: flat(2)}); err == nil {
		t.Error("an unknown policy was accepted")
	}
}

// After a restart, no CPU is given back before every pod source has spoken: a pod not yet heard
// of may be running on it.
func TestCPUsAreKeptUntilTheSourcesAreReady(t *testing.T) {
	dir := t.TempDir()
	p := &pods{}
	m, err := newStatic(t, dir, flat(4), "1", &fakeRuntime{}, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	g := pod("g", nil, container("app", "2", "1Gi"))
	p.add(g)
	if err := m.Admit(g); err != nil {
		t.Fatal(err)
	}
	p.remove(g.UID)

	ready := false
	m2, err := New(Config{Policy: PolicyStatic, ReservedCPU: resource.MustParse("1"), StateDir: dir},
		Deps{Topology: flat(4), Runtime: &fakeRuntime{}, Holds: p.holds, SourcesReady: func() bool { return ready }})
	if err != nil {
		t.Fatal(err)
	}
	m2.Reconcile(context.Background())
	if got := m2.CPUSet(g, "app"); got != "1-2" {
		t.Fatalf("CPUs given back before the sources were ready: %q", got)
	}
	ready = true
	m2.Reconcile(context.Background())
	if got := m2.SharedPool().String(); got != "0-3" {
		t.Fatalf("a pod no source knows kept its CPUs: shared %q", got)
	}
}
