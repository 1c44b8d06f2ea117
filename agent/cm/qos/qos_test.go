package qos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/cm"
)

func res(kv ...string) v1.ResourceList {
	out := v1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

type ctr struct{ req, lim v1.ResourceList }

func pod(uid string, cs ...ctr) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid)}}
	for i, c := range cs {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: fmt.Sprint("c", i), Image: "i",
			Resources: v1.ResourceRequirements{Requests: c.req, Limits: c.lim}})
	}
	return p
}

func TestPodCgroup(t *testing.T) {
	g := pod("g", ctr{res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi")})
	b := pod("b", ctr{req: res("cpu", "100m")})
	be := pod("be", ctr{})
	for p, want := range map[*v1.Pod]string{g: "/kubepods/podg", b: "/kubepods/burstable/podb", be: "/kubepods/besteffort/podbe"} {
		if got := PodCgroup("/kubepods", p); got != want {
			t.Errorf("%s: %s, want %s", p.Name, got, want)
		}
	}
	// A running pod stays where its recorded class put it.
	be.Status.QOSClass = v1.PodQOSBurstable
	if got := PodCgroup("/kubepods", be); got != "/kubepods/burstable/podbe" {
		t.Errorf("recorded class: %s", got)
	}
}

func deref[T any](p *T) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

func show(l cm.Limits) string {
	return fmt.Sprintf("shares=%s quota=%s period=%s memory=%s pids=%s hugepages=%v",
		deref(l.CPUShares), deref(l.CPUQuota), deref(l.CPUPeriod), deref(l.Memory), deref(l.Pids), l.HugePages)
}

func TestPodLimits(t *testing.T) {
	init := func(p *v1.Pod, c ctr, always bool) *v1.Pod {
		ic := v1.Container{Name: "init", Image: "i", Resources: v1.ResourceRequirements{Requests: c.req, Limits: c.lim}}
		if always {
			rp := v1.ContainerRestartPolicyAlways
			ic.RestartPolicy = &rp
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, ic)
		return p
	}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		pids int64
		want string
	}{
		{"guaranteed: shares, quota, memory", pod("g", ctr{res("cpu", "1500m", "memory", "1Gi"), res("cpu", "1500m", "memory", "1Gi")}, ctr{res("cpu", "500m", "memory", "512Mi"), res("cpu", "500m", "memory", "512Mi")}), 0,
			"shares=2048 quota=200000 period=100000 memory=1610612736 pids=- hugepages=map[]"},
		{"burstable with every limit declared", pod("b", ctr{res("cpu", "100m", "memory", "64Mi"), res("cpu", "200m", "memory", "128Mi")}), 0,
			"shares=102 quota=20000 period=100000 memory=134217728 pids=- hugepages=map[]"},
		{"burstable, one container without limits: no quota, no memory limit", pod("b", ctr{res("cpu", "100m"), res("cpu", "200m", "memory", "128Mi")}, ctr{req: res("cpu", "50m")}), 0,
			"shares=153 quota=- period=- memory=- pids=- hugepages=map[]"},
		{"burstable, cpu limits everywhere, memory not", pod("b", ctr{res("cpu", "100m"), res("cpu", "1")}, ctr{res("cpu", "5m"), res("cpu", "5m")}), 0,
			"shares=107 quota=100500 period=100000 memory=- pids=- hugepages=map[]"},
		{"besteffort: the minimum shares, pids", pod("be", ctr{}), 1024,
			"shares=2 quota=- period=- memory=- pids=1024 hugepages=map[]"},
		{"an init container larger than the app counts", init(pod("g", ctr{res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi")}), ctr{res("cpu", "2", "memory", "2Gi"), res("cpu", "2", "memory", "2Gi")}, false), 0,
			"shares=2048 quota=200000 period=100000 memory=2147483648 pids=- hugepages=map[]"},
		{"a sidecar adds to the app", init(pod("g", ctr{res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi")}), ctr{res("cpu", "500m", "memory", "256Mi"), res("cpu", "500m", "memory", "256Mi")}, true), 0,
			"shares=1536 quota=150000 period=100000 memory=1342177280 pids=- hugepages=map[]"},
		{"huge pages from the requests", pod("g", ctr{res("cpu", "1", "memory", "1Gi", "hugepages-2Mi", "64Mi"), res("cpu", "1", "memory", "1Gi", "hugepages-2Mi", "64Mi")}), 0,
			"shares=1024 quota=100000 period=100000 memory=1073741824 pids=- hugepages=map[2097152:67108864]"},
		{"guaranteed with a RuntimeClass overhead: added to shares, quota and memory", overhead(pod("g", ctr{res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi")}), res("cpu", "250m", "memory", "120Mi")), 0,
			"shares=1280 quota=125000 period=100000 memory=1199570944 pids=- hugepages=map[]"},
		{"burstable without memory limits: overhead only in shares and quota", overhead(pod("b", ctr{res("cpu", "100m"), res("cpu", "200m")}), res("cpu", "250m", "memory", "120Mi")), 0,
			"shares=358 quota=45000 period=100000 memory=- pids=- hugepages=map[]"},
		{"besteffort stays besteffort with an overhead", overhead(pod("be", ctr{}), res("cpu", "250m", "memory", "120Mi")), 0,
			"shares=2 quota=- period=- memory=- pids=- hugepages=map[]"},
		{"a tiny limit gets the kernel's 1ms quota", pod("b", ctr{res("cpu", "1m"), res("cpu", "1m")}), 0,
			"shares=2 quota=1000 period=100000 memory=- pids=- hugepages=map[]"},
	} {
		if got := show(PodLimits(tc.pod, cm.QuotaPeriod, tc.pids)); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// overhead gives p the overhead a RuntimeClass sets.
func overhead(p *v1.Pod, o v1.ResourceList) *v1.Pod {
	p.Spec.Overhead = o
	return p
}

func TestBurstableShares(t *testing.T) {
	g := pod("g", ctr{res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi")})
	b1 := pod("b1", ctr{req: res("cpu", "250m")})
	b2 := pod("b2", ctr{req: res("cpu", "500m")}, ctr{req: res("memory", "1Gi")})
	be := pod("be", ctr{})
	sandboxed := overhead(pod("b3", ctr{req: res("cpu", "250m")}), res("cpu", "250m"))
	for _, tc := range []struct {
		pods []*v1.Pod
		want uint64
	}{
		{nil, 2},
		{[]*v1.Pod{g, be}, 2},
		{[]*v1.Pod{g, b1}, 256},
		{[]*v1.Pod{b1, b2, be}, 768},
		{[]*v1.Pod{b1, sandboxed}, 768},
	} {
		if got := BurstableShares(tc.pods); got != tc.want {
			t.Errorf("%d pods: %d, want %d", len(tc.pods), got, tc.want)
		}
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

type podSet struct {
	mu   sync.Mutex
	pods []*v1.Pod
}

func (s *podSet) set(p ...*v1.Pod) { s.mu.Lock(); s.pods = p; s.mu.Unlock() }
func (s *podSet) get() []*v1.Pod {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*v1.Pod(nil), s.pods...)
}

func fakeV1(t *testing.T) *cm.Cgroups {
	mount := t.TempDir()
	for _, s := range []string{"cpu", "memory", "pids", "hugetlb", "freezer"} {
		if err := os.Mkdir(filepath.Join(mount, s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return &cm.Cgroups{Mount: mount}
}

func TestManagerV1(t *testing.T) {
	c := fakeV1(t)
	active := &podSet{}
	m := New(Config{Root: "/kubepods", PodPidsLimit: 100}, Deps{Cgroups: c, ActivePods: active.get,
		RuntimePods: func(context.Context) (map[types.UID]bool, error) { return nil, nil }})
	if err := m.UpdateQoS(); err != nil {
		t.Fatal(err)
	}
	shares := func(tier string) string {
		return readFile(t, filepath.Join(c.Mount, "cpu/kubepods", tier, "cpu.shares"))
	}
	if shares("burstable") != "2" || shares("besteffort") != "2" {
		t.Errorf("no pods: burstable %s besteffort %s", shares("burstable"), shares("besteffort"))
	}
	b := pod("b", ctr{res("cpu", "500m", "memory", "64Mi"), res("cpu", "1", "memory", "128Mi")})
	g := pod("g", ctr{res("cpu", "1", "memory", "1Gi"), res("cpu", "1", "memory", "1Gi")})
	active.set(b, g)
	for _, p := range []*v1.Pod{b, g} {
		if err := m.EnsurePod(p); err != nil {
			t.Fatal(err)
		}
	}
	if shares("burstable") != "512" {
		t.Errorf("burstable shares with b: %s", shares("burstable"))
	}
	for file, want := range map[string]string{
		"cpu/kubepods/burstable/podb/cpu.shares":               "512",
		"cpu/kubepods/burstable/podb/cpu.cfs_quota_us":         "100000",
		"cpu/kubepods/burstable/podb/cpu.cfs_period_us":        "100000",
		"memory/kubepods/burstable/podb/memory.limit_in_bytes": fmt.Sprint(128 << 20),
		"pids/kubepods/burstable/podb/pids.max":                "100",
		"cpu/kubepods/podg/cpu.shares":                         "1024",
		"memory/kubepods/podg/memory.limit_in_bytes":           fmt.Sprint(1 << 30),
	} {
		if got := readFile(t, filepath.Join(c.Mount, file)); got != want {
			t.Errorf("%s = %s, want %s", file, got, want)
		}
	}
	// b goes: its requests leave the burstable tier.
	active.set(g)
	if err := m.UpdateQoS(); err != nil {
		t.Fatal(err)
	}
	if shares("burstable") != "2" {
		t.Errorf("burstable shares after b left: %s", shares("burstable"))
	}
}

func TestManagerV2(t *testing.T) {
	mount := t.TempDir()
	for _, f := range []string{"cgroup.subtree_control", "kubepods/cgroup.subtree_control", "kubepods/burstable/cgroup.subtree_control"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(mount, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mount, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := &cm.Cgroups{Mount: mount, Unified: true}
	b := pod("b", ctr{res("cpu", "250m", "memory", "64Mi"), res("cpu", "500m", "memory", "128Mi")})
	m := New(Config{Root: "/kubepods"}, Deps{Cgroups: c, ActivePods: func() []*v1.Pod { return []*v1.Pod{b} }})
	if err := m.EnsurePod(b); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"kubepods/burstable/cpu.weight":      fmt.Sprint(cm.SharesToWeight(256)),
		"kubepods/besteffort/cpu.weight":     "1",
		"kubepods/burstable/podb/cpu.weight": fmt.Sprint(cm.SharesToWeight(256)),
		"kubepods/burstable/podb/cpu.max":    "50000 100000",
		"kubepods/burstable/podb/memory.max": fmt.Sprint(128 << 20),
	} {
		if got := readFile(t, filepath.Join(mount, file)); got != want {
			t.Errorf("%s = %s, want %s", file, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(mount, "kubepods/burstable/podb/pids.max")); err == nil {
		t.Error("pids.max written without podPidsLimit")
	}
}

// Orphans are found by scanning every hierarchy; the active pods' and the runtime's stay.
func TestCleanupOrphansScans(t *testing.T) {
	c := fakeV1(t)
	// Empty folders, as the kernel's cgroups look to rmdir (the control files are not files).
	for _, d := range []string{"cpu/kubepods/burstable/podgone", "freezer/kubepods/burstable/podgone", "freezer/kubepods/burstable/podgone/ctr1",
		"memory/kubepods/podgone2", "cpu/kubepods/besteffort/podactive", "cpu/kubepods/podheld", "cpu/kubepods/burstable/notapod"} {
		if err := os.MkdirAll(filepath.Join(c.Mount, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	m := New(Config{Root: "/kubepods"}, Deps{Cgroups: c,
		ActivePods:  func() []*v1.Pod { return []*v1.Pod{pod("active", ctr{})} },
		RuntimePods: func(context.Context) (map[types.UID]bool, error) { return map[types.UID]bool{"held": true}, nil }})
	if err := m.CleanupOrphans(context.Background()); err != nil {
		t.Fatal(err)
	}
	for d, want := range map[string]bool{
		"cpu/kubepods/burstable/podgone": false, "freezer/kubepods/burstable/podgone": false, "memory/kubepods/podgone2": false,
		"cpu/kubepods/besteffort/podactive": true, "cpu/kubepods/podheld": true, "cpu/kubepods/burstable/notapod": true,
	} {
		_, err := os.Stat(filepath.Join(c.Mount, d))
		if (err == nil) != want {
			t.Errorf("%s exists %v, want %v", d, err == nil, want)
		}
	}
	m.deps.RuntimePods = func(context.Context) (map[types.UID]bool, error) { return nil, fmt.Errorf("runtime down") }
	if err := os.MkdirAll(filepath.Join(c.Mount, "cpu/kubepods/podother"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.CleanupOrphans(context.Background()); err == nil {
		t.Error("without the runtime's list nothing is an orphan")
	}
	if _, err := os.Stat(filepath.Join(c.Mount, "cpu/kubepods/podother")); err != nil {
		t.Error("removed while the runtime could not be asked")
	}
}

// A resize writes one limit at a time on the pod cgroup, leaving the others as they are.
func TestSetPodLimitsWritesOnlyWhatIsGiven(t *testing.T) {
	c := fakeV1(t)
	b := pod("b", ctr{res("cpu", "500m", "memory", "64Mi"), res("cpu", "1", "memory", "128Mi")})
	m := New(Config{Root: "/kubepods"}, Deps{Cgroups: c, ActivePods: func() []*v1.Pod { return []*v1.Pod{b} }})
	if err := m.EnsurePod(b); err != nil {
		t.Fatal(err)
	}
	grown := b.DeepCopy()
	grown.Spec.Containers[0].Resources.Limits = res("cpu", "2", "memory", "256Mi")
	want := m.PodLimits(grown)
	if err := m.SetPodLimits(b, cm.Limits{Memory: want.Memory}); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"memory/kubepods/burstable/podb/memory.limit_in_bytes": fmt.Sprint(256 << 20),
		"cpu/kubepods/burstable/podb/cpu.cfs_quota_us":         "100000",
	} {
		if got := readFile(t, filepath.Join(c.Mount, file)); got != want {
			t.Errorf("%s = %s, want %s", file, got, want)
		}
	}
	if err := os.WriteFile(filepath.Join(c.Mount, "memory/kubepods/burstable/podb/memory.usage_in_bytes"), []byte("12345\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := m.PodMemoryUsage(b); err != nil || got != 12345 {
		t.Fatalf("PodMemoryUsage = %d, %v", got, err)
	}
}

// A pod whose cgroup holds its limits is not written again at its next sync; a change of its
// limits, a resize's partial write or the cgroup's removal makes the next sync write it whole.
func TestEnsurePodWritesOnlyWhatChanged(t *testing.T) {
	c := fakeV1(t)
	b := pod("b", ctr{res("cpu", "500m", "memory", "64Mi"), res("cpu", "1", "memory", "128Mi")})
	m := New(Config{Root: "/kubepods"}, Deps{Cgroups: c, ActivePods: func() []*v1.Pod { return []*v1.Pod{b} }})
	memFile := filepath.Join(c.Mount, "memory/kubepods/burstable/podb/memory.limit_in_bytes")
	mark := func() { // a value no write of EnsurePod makes, so a rewrite shows
		if err := os.WriteFile(memFile, []byte("1"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ensure := func(p *v1.Pod, want string) {
		t.Helper()
		if err := m.EnsurePod(p); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, memFile); got != want {
			t.Errorf("memory.limit_in_bytes = %s, want %s", got, want)
		}
	}
	ensure(b, fmt.Sprint(128<<20))
	mark()
	ensure(b, "1") // unchanged limits: nothing written
	grown := b.DeepCopy()
	grown.Spec.Containers[0].Resources.Limits = res("cpu", "1", "memory", "256Mi")
	ensure(grown, fmt.Sprint(256<<20))
	if err := m.SetPodLimits(grown, cm.Limits{CPUShares: m.PodLimits(grown).CPUShares}); err != nil {
		t.Fatal(err)
	}
	mark()
	ensure(grown, fmt.Sprint(256<<20)) // after a partial write, whole again
	mark()
	if err := os.RemoveAll(filepath.Join(c.Mount, "cpu/kubepods/burstable/podb")); err != nil {
		t.Fatal(err)
	}
	ensure(grown, fmt.Sprint(256<<20)) // missing in one hierarchy: made again, all written
}
