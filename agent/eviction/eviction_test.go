package eviction

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const mi = 1 << 20

// fakeMeasurer returns obs; reclaim hooks may change it between readings.
type fakeMeasurer struct {
	obs Observations
	err error
}

func (f *fakeMeasurer) Measure(context.Context) (Observations, error) {
	if f.err != nil {
		return nil, f.err
	}
	out := Observations{}
	for k, v := range f.obs {
		out[k] = v
	}
	return out, nil
}

type fakeStats map[types.UID]PodUsage

func (f fakeStats) PodUsage(context.Context) (map[types.UID]PodUsage, error) { return f, nil }

type kill struct {
	pod   string
	grace int64
	msg   string
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

type fixture struct {
	m     *Manager
	meas  *fakeMeasurer
	clock *fakeClock
	kills []kill
	pods  []*v1.Pod
	stats fakeStats
}

func newFixture(t *testing.T, hard, soft, grace map[string]string, transition time.Duration) *fixture {
	t.Helper()
	ts, err := ParseThresholds(Settings{Hard: hard, Soft: soft, SoftGracePeriod: grace})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{meas: &fakeMeasurer{obs: Observations{}}, clock: &fakeClock{t: time.Unix(1000, 0)}, stats: fakeStats{}}
	f.m = New(Config{Thresholds: ts, PressureTransitionPeriod: transition, MaxPodGracePeriodSeconds: 30, NodeName: "n"},
		Deps{Measurer: f.meas, Stats: f.stats, Now: f.clock.now, Log: slog.New(slog.DiscardHandler),
			ActivePods: func() []*v1.Pod { return append([]*v1.Pod{}, f.pods...) },
			Kill: func(p *v1.Pod, g int64, msg string) error {
				f.kills = append(f.kills, kill{p.Name, g, msg})
				return nil
			}})
	return f
}

func (f *fixture) memory(availMi int64) {
	f.meas.obs[SignalMemoryAvailable] = Observation{Available: availMi * mi, Capacity: 4096 * mi}
}

func pod(name string, prio int32, memReqMi int64) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)},
		Spec: v1.PodSpec{Priority: &prio, Containers: []v1.Container{{Name: "c"}}}}
	if memReqMi > 0 {
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: *resource.NewQuantity(memReqMi*mi, resource.BinarySI)}
	}
	return p
}

func TestParseThresholdsReadsKubeletDefaultsAndFlagForm(t *testing.T) {
	ts, err := ParseThresholds(Settings{Hard: DefaultEvictionHard()})
	if err != nil || len(ts) != 5 {
		t.Fatalf("defaults: %v %v", ts, err)
	}
	m, err := ParseMap("memory.available<100Mi, nodefs.available<10%", "<")
	if err != nil {
		t.Fatal(err)
	}
	ts, err = ParseThresholds(Settings{Hard: m, MinimumReclaim: map[string]string{"memory.available": "50Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, th := range ts {
		switch th.Signal {
		case SignalMemoryAvailable:
			if th.value(0) != 100*mi || th.minReclaim(0) != 50*mi || !th.hard() {
				t.Errorf("memory threshold %+v", th)
			}
		case SignalNodeFsAvailable:
			if th.value(1000) != 100 {
				t.Errorf("nodefs 10%% of 1000 = %d", th.value(1000))
			}
		default:
			t.Errorf("unexpected %s", th.Signal)
		}
	}
	if got := FormatMap(m, "<"); got != "memory.available<100Mi,nodefs.available<10%" {
		t.Errorf("FormatMap = %q", got)
	}
	ts, _ = ParseThresholds(Settings{Hard: map[string]string{"nodefs.available": "0%"}})
	if len(ts) != 0 {
		t.Errorf("0%% should disable the threshold: %v", ts)
	}
}

func TestParseThresholdsErrorsNameTheField(t *testing.T) {
	for _, c := range []struct {
		s    Settings
		want string
	}{
		{Settings{Hard: map[string]string{"memory.free": "1Gi"}}, `evictionHard: unknown eviction signal "memory.free"`},
		{Settings{Hard: map[string]string{"memory.available": "lots"}}, "evictionHard: memory.available"},
		{Settings{Hard: map[string]string{"nodefs.available": "120%"}}, "evictionHard: nodefs.available"},
		{Settings{Soft: map[string]string{"memory.available": "1Gi"}}, "evictionSoftGracePeriod: soft threshold memory.available has no grace period"},
		{Settings{Soft: map[string]string{"memory.available": "1Gi"}, SoftGracePeriod: map[string]string{"memory.available": "soon"}}, "evictionSoftGracePeriod: memory.available"},
		{Settings{MinimumReclaim: map[string]string{"memory.available": "-1Mi"}}, "evictionMinimumReclaim: memory.available"},
		{Settings{Hard: map[string]string{"containerfs.available": "1Gi"}}, "not supported"},
	} {
		_, err := ParseThresholds(c.s)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want it to contain %q", c.s, err, c.want)
		}
	}
}

func TestSoftThresholdEvictsOnlyAfterItsGracePeriod(t *testing.T) {
	f := newFixture(t, nil, map[string]string{"memory.available": "500Mi"}, map[string]string{"memory.available": "1m30s"}, time.Minute)
	f.pods = []*v1.Pod{pod("a", 0, 0)}
	f.memory(400)
	ctx := context.Background()
	if p := f.m.Synchronize(ctx); p != nil {
		t.Fatalf("evicted %s before the grace period", p.Name)
	}
	if !f.m.IsUnderMemoryPressure() {
		t.Error("a soft threshold met reports pressure at once, as the kubelet's")
	}
	f.clock.t = f.clock.t.Add(89 * time.Second)
	if p := f.m.Synchronize(ctx); p != nil {
		t.Fatal("evicted before 90s")
	}
	f.clock.t = f.clock.t.Add(time.Second)
	if p := f.m.Synchronize(ctx); p == nil || p.Name != "a" {
		t.Fatalf("after the grace period: evicted %v", p)
	}
	if len(f.kills) != 1 || f.kills[0].grace != 30 {
		t.Errorf("soft eviction grace = maxPodGracePeriod 30 (pod has none): %+v", f.kills)
	}
	// Recovering resets the clock of the grace period.
	f.memory(1000)
	f.m.Synchronize(ctx)
	f.memory(400)
	f.clock.t = f.clock.t.Add(time.Second)
	if p := f.m.Synchronize(ctx); p != nil {
		t.Fatal("grace period should restart after the threshold cleared")
	}
}

func TestPressureConditionStaysTrueForTransitionPeriod(t *testing.T) {
	f := newFixture(t, map[string]string{"memory.available": "100Mi", "pid.available": "10"}, nil, nil, 5*time.Minute)
	ctx := context.Background()
	f.memory(1000)
	f.meas.obs[SignalPIDAvailable] = Observation{Available: 5000, Capacity: 10000}
	f.meas.obs[SignalNodeFsAvailable] = Observation{Available: 50, Capacity: 100}
	f.m.Synchronize(ctx)
	want := map[v1.NodeConditionType][2]string{
		v1.NodeMemoryPressure: {"False", "KubeletHasSufficientMemory"},
		v1.NodeDiskPressure:   {"False", "KubeletHasNoDiskPressure"},
		v1.NodePIDPressure:    {"False", "KubeletHasSufficientPID"},
	}
	check := func(stage string) {
		t.Helper()
		conds := f.m.NodeConditions()
		if len(conds) != 3 {
			t.Fatalf("%s: %d conditions, want MemoryPressure, DiskPressure, PIDPressure", stage, len(conds))
		}
		for _, c := range conds {
			if w := want[c.Type]; string(c.Status) != w[0] || c.Reason != w[1] || c.Message == "" {
				t.Errorf("%s: %s = %s/%s, want %v", stage, c.Type, c.Status, c.Reason, w)
			}
		}
	}
	check("calm")
	f.memory(50)
	f.m.Synchronize(ctx)
	want[v1.NodeMemoryPressure] = [2]string{"True", "KubeletHasInsufficientMemory"}
	check("under pressure")
	f.memory(1000)
	f.clock.t = f.clock.t.Add(4*time.Minute + 59*time.Second)
	f.m.Synchronize(ctx)
	check("recovered, within the transition period")
	if !f.m.IsUnderMemoryPressure() || f.m.IsUnderDiskPressure() || f.m.IsUnderPIDPressure() {
		t.Error("IsUnder* disagree with the conditions")
	}
	f.clock.t = f.clock.t.Add(time.Second)
	f.m.Synchronize(ctx)
	want[v1.NodeMemoryPressure] = [2]string{"False", "KubeletHasSufficientMemory"}
	check("transition period over")
}

func TestRankMemoryExceedsRequestsThenPriorityThenUsageAboveRequests(t *testing.T) {
	pods := []*v1.Pod{pod("within-low", 0, 500), pod("over-high", 100, 100), pod("over-low-small", 0, 100), pod("over-low-big", 0, 100)}
	usage := map[types.UID]PodUsage{
		"within-low": {Memory: 400 * mi}, "over-high": {Memory: 900 * mi},
		"over-low-small": {Memory: 150 * mi}, "over-low-big": {Memory: 600 * mi},
	}
	Rank(SignalMemoryAvailable, pods, usage)
	assertOrder(t, pods, "over-low-big", "over-low-small", "over-high", "within-low")
}

func TestRankCountsOverheadOnlyWithRequests(t *testing.T) {
	overhead := v1.ResourceList{v1.ResourceMemory: *resource.NewQuantity(300*mi, resource.BinarySI)}
	// 100Mi requested + 300Mi overhead: 350Mi used is within its requests.
	withReq := pod("sandboxed-requests", 0, 100)
	withReq.Spec.Overhead = overhead
	// Nothing requested: the overhead does not count, so 50Mi used exceeds its (zero) requests.
	bestEffort := pod("sandboxed-besteffort", 0, 0)
	bestEffort.Spec.Overhead = overhead
	pods := []*v1.Pod{withReq, bestEffort}
	usage := map[types.UID]PodUsage{"sandboxed-requests": {Memory: 350 * mi}, "sandboxed-besteffort": {Memory: 50 * mi}}
	Rank(SignalMemoryAvailable, pods, usage)
	assertOrder(t, pods, "sandboxed-besteffort", "sandboxed-requests")
	if got := requests(withReq, v1.ResourceMemory); got != 400*mi {
		t.Errorf("requests with overhead = %d, want %d", got, 400*mi)
	}
	if got := requests(bestEffort, v1.ResourceMemory); got != 0 {
		t.Errorf("requests of a pod requesting nothing = %d, want 0", got)
	}
}

func TestRankPIDsByPriorityThenProcessCount(t *testing.T) {
	pods := []*v1.Pod{pod("high-many", 10, 0), pod("low-few", 0, 0), pod("low-many", 0, 0)}
	usage := map[types.UID]PodUsage{"high-many": {Processes: 900}, "low-few": {Processes: 3}, "low-many": {Processes: 40}}
	Rank(SignalPIDAvailable, pods, usage)
	assertOrder(t, pods, "low-many", "low-few", "high-many")
}

func TestRankDiskByExceedingEphemeralStorageRequests(t *testing.T) {
	req := pod("requested", 0, 0)
	req.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("1Gi")}
	pods := []*v1.Pod{req, pod("small", 5, 0), pod("big", 5, 0)}
	usage := map[types.UID]PodUsage{"requested": {Disk: 900 * mi}, "small": {Disk: 10 * mi}, "big": {Disk: 20 * mi}}
	Rank(SignalNodeFsAvailable, pods, usage)
	assertOrder(t, pods, "big", "small", "requested")
}

func assertOrder(t *testing.T, pods []*v1.Pod, want ...string) {
	t.Helper()
	var got []string
	for _, p := range pods {
		got = append(got, p.Name)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("order %v, want %v", got, want)
	}
}

func TestHardMemoryThresholdEvictsOnePodPerPassSkippingCriticalOnes(t *testing.T) {
	f := newFixture(t, map[string]string{"memory.available": "100Mi"}, nil, nil, time.Minute)
	static := pod("static", 0, 0)
	static.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	critical := pod("critical", systemCriticalPriority, 0)
	f.pods = []*v1.Pod{pod("second", 0, 0), static, critical, pod("first", 0, 0)}
	for _, p := range f.pods {
		f.stats[p.UID] = PodUsage{Memory: 10 * mi, Containers: map[string]ContainerUsage{"c": {Memory: 10 * mi}}}
	}
	f.stats["static"] = PodUsage{Memory: 3000 * mi}
	f.stats["critical"] = PodUsage{Memory: 3000 * mi}
	f.stats["first"] = PodUsage{Memory: 200 * mi, Containers: map[string]ContainerUsage{"c": {Memory: 200 * mi}}}
	f.memory(50)
	f.m.Synchronize(context.Background())
	if len(f.kills) != 1 || f.kills[0].pod != "first" {
		t.Fatalf("first pass kills %+v, want only 'first'", f.kills)
	}
	k := f.kills[0]
	if k.grace != hardEvictionGracePeriod {
		t.Errorf("hard eviction grace %d", k.grace)
	}
	want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. " +
		"Container c was using 200Mi, request is 0, has larger consumption of memory. "
	if k.msg != want {
		t.Errorf("message\n %q\nwant\n %q", k.msg, want)
	}
	f.pods = f.pods[:3] // 'first' is gone
	f.m.Synchronize(context.Background())
	if len(f.kills) != 2 || f.kills[1].pod != "second" {
		t.Fatalf("second pass kills %+v", f.kills)
	}
	f.pods = f.pods[1:3]
	if p := f.m.Synchronize(context.Background()); p != nil || len(f.kills) != 2 {
		t.Fatalf("static and critical pods were evicted: %+v", f.kills)
	}
}

func TestDiskPressureReclaimsNodeLevelResourcesBeforeEvicting(t *testing.T) {
	for _, c := range []struct {
		name        string
		freedBytes  int64
		wantEvicted bool
	}{
		{"reclaim is enough", 300, false},
		{"reclaim is not enough", 30, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, map[string]string{"nodefs.available": "10%"}, nil, nil, time.Minute)
			f.pods = []*v1.Pod{pod("a", 0, 0)}
			f.meas.obs[SignalNodeFsAvailable] = Observation{Available: 50, Capacity: 1000}
			var calls []string
			f.m.deps.DeleteDeadContainers = func(context.Context) error {
				calls = append(calls, "containers")
				return nil
			}
			f.m.deps.DeleteUnusedImages = func(context.Context) error {
				calls = append(calls, "images")
				o := f.meas.obs[SignalNodeFsAvailable]
				o.Available += c.freedBytes
				f.meas.obs[SignalNodeFsAvailable] = o
				return nil
			}
			p := f.m.Synchronize(context.Background())
			if strings.Join(calls, ",") != "containers,images" {
				t.Errorf("reclaim calls %v", calls)
			}
			if (p != nil) != c.wantEvicted {
				t.Errorf("evicted %v, want eviction %v", p, c.wantEvicted)
			}
			if c.wantEvicted && !strings.HasPrefix(f.kills[0].msg, "The node was low on resource: ephemeral-storage. ") {
				t.Errorf("message %q", f.kills[0].msg)
			}
		})
	}
}

func TestMemoryPressureNeverRunsNodeLevelReclaim(t *testing.T) {
	f := newFixture(t, map[string]string{"memory.available": "100Mi"}, nil, nil, time.Minute)
	f.pods = []*v1.Pod{pod("a", 0, 0)}
	f.memory(10)
	f.m.deps.DeleteUnusedImages = func(context.Context) error { t.Error("image GC for memory pressure"); return nil }
	if f.m.Synchronize(context.Background()) == nil {
		t.Error("no eviction")
	}
}

func TestAdmitUnderPressureFollowsKubeletRules(t *testing.T) {
	f := newFixture(t, map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"}, nil, nil, time.Minute)
	f.memory(1000)
	f.meas.obs[SignalNodeFsAvailable] = Observation{Available: 500, Capacity: 1000}
	ctx := context.Background()
	f.m.Synchronize(ctx)
	bestEffort := pod("be", 0, 0)
	burstable := pod("bu", 0, 100)
	tolerating := pod("tol", 0, 0)
	tolerating.Spec.Tolerations = []v1.Toleration{{Key: v1.TaintNodeMemoryPressure, Operator: v1.TolerationOpExists, Effect: v1.TaintEffectNoSchedule}}
	critical := pod("crit", systemCriticalPriority+1000, 0)
	if r, _ := f.m.Admit(bestEffort); r != "" {
		t.Error("no pressure: refused")
	}
	f.memory(10)
	f.m.Synchronize(ctx)
	for p, admit := range map[*v1.Pod]bool{bestEffort: false, burstable: true, tolerating: true, critical: true} {
		r, msg := f.m.Admit(p)
		if (r == "") != admit {
			t.Errorf("memory pressure, %s: reason %q message %q, want admitted=%v", p.Name, r, msg, admit)
		}
		if !admit && (r != "Evicted" || msg != "The node had condition: [MemoryPressure]. ") {
			t.Errorf("rejection %q %q", r, msg)
		}
	}
	f.memory(1000)
	f.meas.obs[SignalNodeFsAvailable] = Observation{Available: 1, Capacity: 1000}
	f.clock.t = f.clock.t.Add(2 * time.Minute) // memory pressure has passed its transition period
	f.m.Synchronize(ctx)
	for p, admit := range map[*v1.Pod]bool{bestEffort: false, burstable: false, tolerating: false, critical: true} {
		r, msg := f.m.Admit(p)
		if (r == "") != admit {
			t.Errorf("disk pressure, %s: reason %q, want admitted=%v", p.Name, r, admit)
		}
		if !admit && msg != "The node had condition: [DiskPressure]. " {
			t.Errorf("rejection message %q", msg)
		}
	}
}

func TestMachineMeasuresPlausibleSignalsOnThisHost(t *testing.T) {
	dir := t.TempDir()
	obs, err := (&Machine{RootDir: dir}).Measure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	mem, ok := obs[SignalMemoryAvailable]
	if !ok || mem.Capacity <= 0 || mem.Available <= 0 || mem.Available > mem.Capacity {
		t.Errorf("memory.available %+v", mem)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	nodefs := obs[SignalNodeFsAvailable]
	if nodefs.Capacity != int64(st.Blocks)*st.Bsize {
		t.Errorf("nodefs capacity %d, statfs %d", nodefs.Capacity, int64(st.Blocks)*st.Bsize)
	}
	// Other tests write files meanwhile: allow some drift.
	if d := nodefs.Available - int64(st.Bavail)*st.Bsize; d > 512*mi || d < -512*mi {
		t.Errorf("nodefs available %d, statfs %d", nodefs.Available, int64(st.Bavail)*st.Bsize)
	}
	if obs[SignalImageFsAvailable].Capacity != nodefs.Capacity || obs[SignalNodeFsInodesFree].Capacity != int64(st.Files) {
		t.Errorf("imagefs should fall back to nodefs: %+v", obs)
	}
	pid := obs[SignalPIDAvailable]
	if pid.Capacity <= 0 || pid.Available <= 0 || pid.Available >= pid.Capacity {
		t.Errorf("pid.available %+v", pid)
	}
	// The imagefs the runtime reports is measured on its own.
	obs, err = (&Machine{RootDir: dir, ImageFs: func(context.Context) (string, error) { return "/dev/shm", nil }}).Measure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Statfs("/dev/shm", &st); err == nil && obs[SignalImageFsAvailable].Capacity != int64(st.Blocks)*st.Bsize {
		t.Errorf("imagefs on /dev/shm: %+v", obs[SignalImageFsAvailable])
	}
}

func TestMachineDerivesMemoryAndPIDsFromCgroupV1Files(t *testing.T) {
	root := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("/proc/meminfo", "MemTotal:        4194304 kB\nMemFree:          100000 kB\n")
	write("/sys/fs/cgroup/memory/memory.usage_in_bytes", "3221225472\n")
	write("/sys/fs/cgroup/memory/memory.stat", "cache 5\ntotal_inactive_file 1073741824\n")
	write("/proc/sys/kernel/pid_max", "4194304\n")
	write("/proc/sys/kernel/threads-max", "1000\n")
	write("/proc/loadavg", "0.52 0.58 0.59 2/3 12345\n")
	obs, err := (&Machine{RootDir: root, Root: root}).Measure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// 4Gi total − (3Gi usage − 1Gi inactive file) = 2Gi.
	if got := obs[SignalMemoryAvailable]; got.Available != 2<<30 || got.Capacity != 4<<30 {
		t.Errorf("memory.available %+v, want 2Gi of 4Gi", got)
	}
	// min(pid_max, threads-max) − 3 tasks.
	if got := obs[SignalPIDAvailable]; got.Available != 997 || got.Capacity != 1000 {
		t.Errorf("pid.available %+v, want 997 of 1000", got)
	}
}

// The same on a made-up cgroup v2 tree (a root with cgroup.controllers): the root has no
// memory.current, so its usage is its memory.stat's anon + file; the pods' cgroup reads
// memory.current and memory.max; memory thresholds are refused, naming cgroup v2.
func TestMachineDerivesMemoryFromCgroupV2Files(t *testing.T) {
	root := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("/proc/meminfo", "MemTotal:        4194304 kB\nMemFree:         1048576 kB\n")
	write("/sys/fs/cgroup/cgroup.controllers", "cpu memory pids\n")
	write("/sys/fs/cgroup/memory.stat", "anon 1073741824\nfile 1610612736\ninactive_file 1073741824\n")
	write("/sys/fs/cgroup/kubepods/memory.max", "1073741824\n")
	write("/sys/fs/cgroup/kubepods/memory.current", "734003200\n")
	write("/sys/fs/cgroup/kubepods/memory.stat", "anon 1\ninactive_file 104857600\n")
	write("/proc/sys/kernel/pid_max", "4194304\n")
	write("/proc/loadavg", "0.52 0.58 0.59 2/3 12345\n")
	m := &Machine{RootDir: root, Root: root, PodsCgroup: "/kubepods"}
	obs, err := m.Measure(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// 4Gi total − ((1Gi anon + 1.5Gi file) − 1Gi inactive file) = 2.5Gi; MemFree plays no part.
	if got := obs[SignalMemoryAvailable]; got.Available != 5<<29 || got.Capacity != 4<<30 {
		t.Errorf("memory.available %+v, want 2.5Gi of 4Gi", got)
	}
	if got, want := obs[SignalAllocatableMemoryAvailable], (Observation{Available: 1<<30 - (700*mi - 100*mi), Capacity: 1 << 30}); got != want {
		t.Errorf("allocatableMemory.available %+v, want %+v", got, want)
	}
	write("/sys/fs/cgroup/kubepods/memory.max", "max\n")
	if _, ok, err := m.podsMemory(); ok || err != nil {
		t.Errorf("no limit: observed %v, err %v", ok, err)
	}
	if err := m.CheckMemcgNotification(); err == nil || !strings.Contains(err.Error(), "cgroup v2") {
		t.Errorf("memory thresholds on cgroup v2: %v", err)
	}
}

func TestAdmitUnderPIDPressureRefusesAllButCriticalPods(t *testing.T) {
	f := newFixture(t, map[string]string{"pid.available": "100"}, nil, nil, time.Minute)
	f.meas.obs[SignalPIDAvailable] = Observation{Available: 10, Capacity: 1000}
	f.m.Synchronize(context.Background())
	if r, msg := f.m.Admit(pod("bu", 0, 100)); r != "Evicted" || msg != "The node had condition: [PIDPressure]. " {
		t.Errorf("burstable pod under PID pressure: %q %q", r, msg)
	}
	if r, _ := f.m.Admit(pod("crit", systemCriticalPriority, 0)); r != "" {
		t.Errorf("critical pod refused: %q", r)
	}
}

// A condition is only reported from a measurement: none before the signals were read once or
// after a failed reading, and only those whose signals were read.
func TestPressureConditionsOnlyForSignalsRead(t *testing.T) {
	f := newFixture(t, map[string]string{"memory.available": "100Mi"}, nil, nil, time.Minute)
	if c := f.m.NodeConditions(); c != nil {
		t.Fatalf("conditions before any pass = %+v, want none", c)
	}
	f.meas.err = errors.New("cgroup files unreadable")
	f.m.Synchronize(context.Background())
	if c := f.m.NodeConditions(); c != nil {
		t.Fatalf("conditions after a failed measurement = %+v, want none", c)
	}
	f.meas.err = nil
	f.memory(1000)
	f.m.Synchronize(context.Background())
	if c := f.m.NodeConditions(); len(c) != 1 || c[0].Type != v1.NodeMemoryPressure || c[0].Status != v1.ConditionFalse {
		t.Fatalf("conditions with only memory read = %+v, want MemoryPressure False alone", c)
	}
	f.meas.obs[SignalNodeFsAvailable] = Observation{Available: 50, Capacity: 100}
	f.meas.obs[SignalPIDAvailable] = Observation{Available: 50, Capacity: 100}
	f.m.Synchronize(context.Background())
	if c := f.m.NodeConditions(); len(c) != 3 {
		t.Fatalf("conditions with every kind read = %+v, want three", c)
	}
}

// As the kubelet's: with the pods' cgroup capped, each hard memory.available threshold also
// guards allocatableMemory.available; without the cap a threshold on it is refused.
func TestWithAllocatable(t *testing.T) {
	ts, err := ParseThresholds(Settings{Hard: map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
		Soft: map[string]string{"memory.available": "1Gi"}, SoftGracePeriod: map[string]string{"memory.available": "1m"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := WithAllocatable(ts, true)
	if err != nil {
		t.Fatal(err)
	}
	var added []Threshold
	for _, th := range got[len(ts):] {
		added = append(added, th)
	}
	if len(added) != 1 || added[0].Signal != SignalAllocatableMemoryAvailable || !added[0].hard() || added[0].Quantity.String() != "100Mi" {
		t.Errorf("added %+v, want one hard allocatableMemory.available<100Mi", added)
	}
	if got, _ := WithAllocatable(ts, false); len(got) != len(ts) {
		t.Errorf("without the cap nothing is added: %d thresholds", len(got))
	}
	own, err := ParseThresholds(Settings{Hard: map[string]string{"allocatableMemory.available": "200Mi", "memory.available": "100Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := WithAllocatable(own, true); err != nil || len(got) != 2 {
		t.Errorf("an explicit allocatableMemory.available threshold is kept as the only one: %+v %v", got, err)
	}
	if _, err := WithAllocatable(own, false); err == nil || !strings.Contains(err.Error(), "enforceNodeAllocatable") {
		t.Errorf("allocatableMemory.available without pods enforcement: %v", err)
	}
}

// allocatableMemory.available on a made-up cgroup v1 tree: the kubepods limit less its working set;
// unmeasured without a limit.
func TestPodsMemorySignal(t *testing.T) {
	root := t.TempDir()
	write := func(path, content string) {
		t.Helper()
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("sys/fs/cgroup/memory/kubepods/memory.limit_in_bytes", "1073741824\n")
	write("sys/fs/cgroup/memory/kubepods/memory.usage_in_bytes", "734003200\n")
	write("sys/fs/cgroup/memory/kubepods/memory.stat", "cache 5\ntotal_inactive_file 104857600\n")
	m := &Machine{Root: root, PodsCgroup: "/kubepods"}
	o, ok, err := m.podsMemory()
	if err != nil || !ok {
		t.Fatalf("%v %v", ok, err)
	}
	if want := (Observation{Available: 1<<30 - (700*mi - 100*mi), Capacity: 1 << 30}); o != want {
		t.Errorf("got %+v, want %+v", o, want)
	}
	write("sys/fs/cgroup/memory/kubepods/memory.limit_in_bytes", "9223372036854771712\n")
	if _, ok, err := m.podsMemory(); ok || err != nil {
		t.Errorf("no limit: observed %v, err %v", ok, err)
	}
}

// After an eviction the next pass waits until the evicted pod gave back what it held, so the
// pressure it caused does not cost a second pod its life.
func TestRunWaitsForTheEvictedPodsCleanup(t *testing.T) {
	ts, err := ParseThresholds(Settings{Hard: map[string]string{"memory.available": "500Mi"}})
	if err != nil {
		t.Fatal(err)
	}
	meas := &countingMeasurer{fakeMeasurer: fakeMeasurer{obs: Observations{SignalMemoryAvailable: {Available: 100 * mi, Capacity: 4096 * mi}}},
		calls: make(chan struct{}, 100)}
	kills := make(chan string, 10)
	cleaned := make(chan bool)
	m := New(Config{Thresholds: ts, MonitoringInterval: 10 * time.Millisecond},
		Deps{Measurer: meas, Log: slog.New(slog.DiscardHandler),
			ActivePods: func() []*v1.Pod { return []*v1.Pod{pod("a", 0, 0), pod("b", 0, 0)} },
			Kill:       func(p *v1.Pod, _ int64, _ string) error { kills <- p.Name; return nil },
			PodCleanedUp: func(uid types.UID) bool {
				if uid != "a" && uid != "b" {
					t.Errorf("asked about %s", uid)
				}
				return <-cleaned
			}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	defer func() { cancel(); close(cleaned); <-done }()

	answer := func(v bool) {
		t.Helper()
		select {
		case cleaned <- v:
		case <-time.After(30 * time.Second):
			t.Fatal("the manager did not ask whether the evicted pod was cleaned up")
		}
	}
	<-meas.calls
	first := <-kills
	answer(false) // still tearing down: no pass may run
	answer(false)
	select {
	case <-meas.calls:
		t.Fatal("the signals were read again before the evicted pod was cleaned up")
	case k := <-kills:
		t.Fatalf("%s evicted while %s was still being cleaned up", k, first)
	default:
	}
	answer(true)
	select {
	case <-meas.calls:
	case <-time.After(30 * time.Second):
		t.Fatal("no pass after the evicted pod was cleaned up")
	}
}
