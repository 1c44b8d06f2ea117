package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/cm"
	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/test/harness/fakecri"
)

// reqs builds requirements from cpu and memory requests and limits ("" leaves one out).
func reqs(cpuReq, cpuLim, memReq, memLim string) v1.ResourceRequirements {
	r := v1.ResourceRequirements{Requests: v1.ResourceList{}, Limits: v1.ResourceList{}}
	for _, x := range []struct {
		list v1.ResourceList
		name v1.ResourceName
		v    string
	}{{r.Requests, v1.ResourceCPU, cpuReq}, {r.Limits, v1.ResourceCPU, cpuLim}, {r.Requests, v1.ResourceMemory, memReq}, {r.Limits, v1.ResourceMemory, memLim}} {
		if x.v != "" {
			x.list[x.name] = resource.MustParse(x.v)
		}
	}
	return r
}

func restartFor(names ...v1.ResourceName) []v1.ContainerResizePolicy {
	var out []v1.ContainerResizePolicy
	for _, n := range names {
		out = append(out, v1.ContainerResizePolicy{ResourceName: n, RestartPolicy: v1.RestartContainer})
	}
	return out
}

// planSummary names what the plan does about resizes: "update cpu [a b]", "kill a", "start [0]".
func planSummary(a podActions) string {
	var out []string
	for _, n := range []v1.ResourceName{v1.ResourceMemory, v1.ResourceCPU} {
		if list := a.ContainersToUpdate[n]; len(list) > 0 {
			var names []string
			for _, u := range list {
				names = append(names, u.Spec.Name)
			}
			out = append(out, fmt.Sprintf("update %s %v", n, names))
		}
	}
	var kills []string
	for _, k := range a.ContainersToKill {
		kills = append(kills, k.Name+": "+k.Message)
	}
	slices.Sort(kills)
	for _, k := range kills {
		out = append(out, "kill "+k)
	}
	if len(a.ContainersToStart) > 0 {
		out = append(out, fmt.Sprintf("start %v", a.ContainersToStart))
	}
	if a.NextInitContainerToStart != nil {
		out = append(out, "init "+a.NextInitContainerToStart.Name)
	}
	if a.UpdatePodResources {
		out = append(out, "pod")
	}
	return strings.Join(out, "; ")
}

func TestComputePodActionsResize(t *testing.T) {
	base := reqs("100m", "200m", "64Mi", "128Mi")
	mk := func(policy []v1.ContainerResizePolicy, rs ...v1.ResourceRequirements) *v1.Pod {
		pod := testPod(v1.RestartPolicyAlways, nil)
		for i, r := range rs {
			pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: string(rune('a' + i)), Image: "busybox", Resources: r, ResizePolicy: policy})
		}
		return pod
	}
	statusOf := func(pod *v1.Pod) *kubecontainer.PodStatus {
		st := &kubecontainer.PodStatus{ID: pod.UID, SandboxStatuses: []*runtimeapi.PodSandboxStatus{sandbox("sb1", 0, true)}}
		for _, c := range pod.Spec.Containers {
			st.ContainerStatuses = append(st.ContainerStatuses, running(pod, c.Name))
		}
		return st
	}
	// actuated: every container was given base.
	given := func(string) (v1.ResourceRequirements, bool) { return base, true }
	for _, tc := range []struct {
		name     string
		pod      *v1.Pod
		status   func(*v1.Pod) *kubecontainer.PodStatus
		actuated actuatedFunc
		want     string
	}{
		{name: "nothing changed", pod: mk(nil, base), actuated: given, want: ""},
		{name: "no record of actuation kept: no in-place resize", pod: mk(nil, reqs("1", "1", "1Gi", "1Gi")), want: ""},
		{name: "cpu up in place", pod: mk(nil, reqs("300m", "400m", "64Mi", "128Mi")), actuated: given, want: "update cpu [a]"},
		{name: "memory limit and cpu request", pod: mk(nil, reqs("150m", "200m", "64Mi", "256Mi")), actuated: given,
			want: "update memory [a]; update cpu [a]"},
		{name: "memory request alone is updated too (oom score)", pod: mk(nil, reqs("100m", "200m", "96Mi", "128Mi")), actuated: given,
			want: "update memory [a]"},
		{name: "decreases before increases", pod: mk(nil, reqs("300m", "400m", "64Mi", "128Mi"), reqs("50m", "100m", "64Mi", "128Mi"),
			reqs("250m", "300m", "64Mi", "128Mi")), actuated: given, want: "update cpu [b a c]"},
		{name: "memory restarts by policy", pod: mk(restartFor(v1.ResourceMemory), reqs("100m", "200m", "64Mi", "256Mi")), actuated: given,
			want: "kill a: Container a resize requires restart; start [0]; pod"},
		{name: "policy of another resource: in place", pod: mk(restartFor(v1.ResourceMemory), reqs("300m", "400m", "64Mi", "128Mi")),
			actuated: given, want: "update cpu [a]"},
		{name: "not running: sized when it starts", pod: mk(nil, reqs("300m", "400m", "64Mi", "128Mi")), actuated: given,
			status: func(pod *v1.Pod) *kubecontainer.PodStatus {
				st := statusOf(pod)
				st.ContainerStatuses[0] = exited(pod, "a", 1)
				return st
			}, want: "start [0]"},
		{name: "a container never recorded is given its allocation in place", pod: mk(nil, base),
			actuated: func(string) (v1.ResourceRequirements, bool) { return v1.ResourceRequirements{}, false },
			want:     "update memory [a]; update cpu [a]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := statusOf
			if tc.status != nil {
				st = tc.status
			}
			if got := planSummary(computePodActions(tc.pod, st(tc.pod), nil, tc.actuated)); got != tc.want {
				t.Fatalf("plan %q, want %q", got, tc.want)
			}
		})
	}

	t.Run("sidecar restarts by policy before the app containers go on", func(t *testing.T) {
		pod := testPod(v1.RestartPolicyAlways, []string{"side"}, "a")
		always := v1.ContainerRestartPolicyAlways
		pod.Spec.InitContainers[0].RestartPolicy = &always
		pod.Spec.InitContainers[0].ResizePolicy = restartFor(v1.ResourceCPU)
		pod.Spec.InitContainers[0].Resources = reqs("1", "", "", "")
		st := &kubecontainer.PodStatus{ID: pod.UID, SandboxStatuses: []*runtimeapi.PodSandboxStatus{sandbox("sb1", 0, true)},
			ContainerStatuses: []*kubecontainer.Status{running(pod, "side"), running(pod, "a")}}
		got := planSummary(computePodActions(pod, st, nil, func(string) (v1.ResourceRequirements, bool) { return v1.ResourceRequirements{}, true }))
		if want := "kill side: Container side resize requires restart; init side; pod"; got != want {
			t.Fatalf("plan %q, want %q", got, want)
		}
	})
}

func TestLimitSteps(t *testing.T) {
	p := func(v int64) *int64 { return &v }
	for _, tc := range []struct {
		name         string
		cur, want    *int64
		raise, lower bool
	}{
		{"up", p(100), p(200), true, false},
		{"down", p(200), p(100), false, true},
		{"same", p(100), p(100), false, false},
		{"from unbounded", nil, p(100), false, true},
		{"from unbounded quota", p(-1), p(100), false, true},
		{"to none: left as it is", p(100), nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r, l := limitSteps(tc.cur, tc.want); r != tc.raise || l != tc.lower {
				t.Fatalf("limitSteps = %v %v, want %v %v", r, l, tc.raise, tc.lower)
			}
		})
	}
}

// fakeAllocation keeps actuated resources in memory and the resize failures reported.
type fakeAllocation struct {
	mu       sync.Mutex
	actuated map[string]v1.ResourceRequirements
	failed   []string
}

func (a *fakeAllocation) SetActuatedResources(_ *v1.Pod, c *v1.Container) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.actuated[c.Name] = *c.Resources.DeepCopy()
	return nil
}
func (a *fakeAllocation) ActuatedResources(_ types.UID, name string) (v1.ResourceRequirements, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.actuated[name]
	return r, ok
}
func (a *fakeAllocation) ActuatedPod(pod *v1.Pod) *v1.Pod {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := pod.DeepCopy()
	for i := range p.Spec.Containers {
		if r, ok := a.actuated[p.Spec.Containers[i].Name]; ok {
			p.Spec.Containers[i].Resources = r
		}
	}
	return p
}
func (a *fakeAllocation) ResizeFailed(_ *v1.Pod, msg string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failed = append(a.failed, msg)
}

// fakePodCgroups sums container limits as the pod cgroup's and records writes into the fake
// runtime's call log, so a test sees them in order with UpdateContainerResources.
type fakePodCgroups struct {
	log   func(string)
	usage int64
}

func (f *fakePodCgroups) PodLimits(pod *v1.Pod) cm.Limits {
	var mem, quota int64
	var shares uint64
	for _, c := range pod.Spec.Containers {
		mem += c.Resources.Limits.Memory().Value()
		quota += c.Resources.Limits.Cpu().MilliValue() * 100
		shares += cm.MilliCPUToShares(c.Resources.Requests.Cpu().MilliValue())
	}
	// The pod cgroup holds the RuntimeClass overhead too, as qos.PodLimits makes it.
	if o := pod.Spec.Overhead; o != nil {
		mem += o.Memory().Value()
		quota += o.Cpu().MilliValue() * 100
		shares += cm.MilliCPUToShares(o.Cpu().MilliValue())
	}
	period := uint64(cpuPeriod)
	return cm.Limits{Memory: &mem, CPUQuota: &quota, CPUPeriod: &period, CPUShares: &shares}
}
func (f *fakePodCgroups) SetPodLimits(_ *v1.Pod, l cm.Limits) error {
	switch {
	case l.Memory != nil:
		f.log(fmt.Sprintf("pod mem=%d", *l.Memory))
	case l.CPUQuota != nil:
		f.log(fmt.Sprintf("pod quota=%d", *l.CPUQuota))
	case l.CPUShares != nil:
		f.log(fmt.Sprintf("pod shares=%d", *l.CPUShares))
	}
	return nil
}
func (f *fakePodCgroups) PodMemoryUsage(*v1.Pod) (int64, error) { return f.usage, nil }

type resizeFixture struct {
	*fixture
	alloc  *fakeAllocation
	cg     *fakePodCgroups
	events []string
	mu     sync.Mutex
}

func newResizeFixture(t *testing.T) *resizeFixture {
	f := &resizeFixture{fixture: newFixture(t), alloc: &fakeAllocation{actuated: map[string]v1.ResourceRequirements{}}}
	f.cg = &fakePodCgroups{log: func(s string) { f.mu.Lock(); f.events = append(f.events, s); f.mu.Unlock() }}
	f.m.Allocation, f.m.PodCgroups = f.alloc, f.cg
	f.cri.AddImage("busybox")
	return f
}

// updates are the UpdateContainerResources calls as "<name> cpu=<shares>/<quota> mem=<limit>".
func updates(cri *fakecri.Server) []string {
	var out []string
	for _, c := range cri.CallsWithPrefix("UpdateContainerResources ") {
		f := strings.Fields(c) // UpdateContainerResources <id> <name> cpu=… mem=… cpuset=…
		out = append(out, strings.Join(f[2:len(f)-1], " "))
	}
	return out
}

// steps interleaves the pod cgroup writes with the runtime's resize calls.
func (f *resizeFixture) steps() []string {
	var out []string
	for _, c := range f.cri.Calls() {
		if strings.HasPrefix(c, "UpdateContainerResources") || strings.HasPrefix(c, "StopContainer") || strings.HasPrefix(c, "StartContainer") {
			out = append(out, c)
		}
	}
	return out
}

func resizePod(rs ...v1.ResourceRequirements) *v1.Pod {
	pod := testPod(v1.RestartPolicyAlways, nil)
	for i, r := range rs {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: string(rune('a' + i)), Image: "busybox", Resources: r})
	}
	return pod
}

func withSpec(pod *v1.Pod, rs ...v1.ResourceRequirements) *v1.Pod {
	p := pod.DeepCopy()
	for i, r := range rs {
		p.Spec.Containers[i].Resources = r
	}
	return p
}

func TestSyncPodResizesInPlace(t *testing.T) {
	f := newResizeFixture(t)
	pod := resizePod(reqs("100m", "200m", "64Mi", "128Mi"), reqs("100m", "200m", "64Mi", "128Mi"))
	f.mustSync(pod)
	if got := f.alloc.actuated["a"]; !got.Limits.Memory().Equal(resource.MustParse("128Mi")) {
		t.Fatalf("creation not recorded as actuated: %v", got)
	}
	f.cri.ResetCalls()

	// a grows in memory and cpu, b shrinks in cpu.
	grown := withSpec(pod, reqs("300m", "400m", "64Mi", "256Mi"), reqs("50m", "100m", "64Mi", "128Mi"))
	var log []string
	f.cg.log = func(s string) { log = append(log, s) }
	f.mustSync(grown)
	calls := updates(f.cri)
	want := []string{
		"a cpu=102/20000 mem=268435456", // memory up: cpu as it was
		"b cpu=51/10000 mem=134217728",  // cpu: the decrease first
		"a cpu=307/40000 mem=268435456"} // then the increase, keeping the new memory
	if !slices.Equal(calls, want) {
		t.Fatalf("updates %q, want %q", calls, want)
	}
	// Pod memory rises before the container's; the pod quota rises (net +200m) before the cpu
	// updates; shares rise too (net +150m).
	if wantLog := []string{"pod mem=402653184", "pod quota=50000", "pod shares=358"}; !slices.Equal(log, wantLog) {
		t.Fatalf("pod cgroup writes %q, want %q", log, wantLog)
	}
	for name, c := range map[string]v1.ResourceRequirements{"a": grown.Spec.Containers[0].Resources, "b": grown.Spec.Containers[1].Resources} {
		if got := f.alloc.actuated[name]; !got.Limits.Cpu().Equal(*c.Limits.Cpu()) || !got.Limits.Memory().Equal(*c.Limits.Memory()) {
			t.Fatalf("actuated %s = %v, want %v", name, got, c)
		}
	}
	// The runtime reports the new figures, which the status reads back.
	st := f.status(grown)
	if r := st.FindContainerStatusByName("a").Resources; r == nil || r.CPULimit.String() != "400m" || r.MemoryLimit.String() != "256Mi" {
		t.Fatalf("reported resources of a: %+v", r)
	}
	// Nothing left to do: the next sync changes nothing.
	f.cri.ResetCalls()
	f.mustSync(grown)
	if calls := f.cri.CallsWithPrefix("UpdateContainerResources"); len(calls) != 0 {
		t.Fatalf("resized again: %q", calls)
	}
	if len(f.alloc.failed) != 0 {
		t.Fatalf("resize failures %q", f.alloc.failed)
	}
}

func TestSyncPodShrinksPodCgroupAfterContainers(t *testing.T) {
	f := newResizeFixture(t)
	pod := resizePod(reqs("500m", "1", "64Mi", "256Mi"))
	f.mustSync(pod)
	f.cri.ResetCalls()
	f.cri.SetMemoryUsage("a", 10<<20)
	f.cg.usage = 20 << 20
	var order []string
	f.cg.log = func(s string) { order = append(order, s) }
	orig := f.m.Runtime
	f.m.Runtime = recordingRuntime{orig, func(s string) { order = append(order, s) }}
	f.mustSync(withSpec(pod, reqs("250m", "500m", "64Mi", "128Mi")))
	want := []string{"update a", "pod mem=134217728", "update a", "pod shares=256", "pod quota=50000"}
	if !slices.Equal(order, want) {
		t.Fatalf("order %q, want %q", order, want)
	}
}

// recordingRuntime notes UpdateContainerResources calls in the same log as the pod cgroup writes.
type recordingRuntime struct {
	runtimeapi.RuntimeServiceClient
	log func(string)
}

func (r recordingRuntime) UpdateContainerResources(ctx context.Context, in *runtimeapi.UpdateContainerResourcesRequest, opts ...grpc.CallOption) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	resp, err := r.RuntimeServiceClient.UpdateContainerResources(ctx, in, opts...)
	if err == nil {
		r.log("update a")
	}
	return resp, err
}

func TestSyncPodRefusesMemoryLimitBelowUsage(t *testing.T) {
	f := newResizeFixture(t)
	pod := resizePod(reqs("100m", "200m", "64Mi", "256Mi"))
	f.mustSync(pod)
	f.cri.ResetCalls()
	f.cri.SetMemoryUsage("a", 200<<20)
	f.cg.usage = 210 << 20
	err := f.sync(withSpec(pod, reqs("100m", "200m", "64Mi", "128Mi")))
	if err == nil {
		t.Fatal("a memory limit below usage was applied")
	}
	if calls := f.cri.CallsWithPrefix("UpdateContainerResources"); len(calls) != 0 {
		t.Fatalf("updated despite the refusal: %q", calls)
	}
	want := `cannot decrease memory limits: [attempting to set pod memory limit (134217728) below current usage (220200960), ` +
		`attempting to set container "a" memory limit (134217728) below current usage (209715200)]`
	if len(f.alloc.failed) != 1 || f.alloc.failed[0] != want {
		t.Fatalf("failures %q, want %q", f.alloc.failed, want)
	}
	// Once the usage dropped, the next sync applies it.
	f.cri.SetMemoryUsage("a", 10<<20)
	f.cg.usage = 20 << 20
	f.mustSync(withSpec(pod, reqs("100m", "200m", "64Mi", "128Mi")))
	if calls := f.cri.CallsWithPrefix("UpdateContainerResources"); len(calls) != 1 {
		t.Fatalf("updates %q, want one", calls)
	}
}

func TestSyncPodRestartsForResizePolicy(t *testing.T) {
	f := newResizeFixture(t)
	pod := resizePod(reqs("100m", "200m", "64Mi", "128Mi"))
	pod.Spec.Containers[0].ResizePolicy = restartFor(v1.ResourceMemory)
	f.mustSync(pod)
	f.cri.ResetCalls()
	var log []string
	f.cg.log = func(s string) { log = append(log, "pod "+s) }
	f.mustSync(withSpec(pod, reqs("100m", "200m", "64Mi", "256Mi")))
	if got, want := f.steps(), []string{"StopContainer a timeout=30", "StartContainer a"}; !slices.Equal(got, want) {
		t.Fatalf("steps %q, want %q", got, want)
	}
	if len(log) == 0 || !strings.Contains(log[0], "mem=268435456") {
		t.Fatalf("pod cgroup not raised before the restart: %q", log)
	}
	if got := f.alloc.actuated["a"]; !got.Limits.Memory().Equal(resource.MustParse("256Mi")) {
		t.Fatalf("restarted container's actuated %v", got)
	}
	// No crash-loop back-off for a restart the resize asked for: the same sync started it.
	if r := f.cri.CallsWithPrefix("CreateContainer"); len(r) != 1 {
		t.Fatalf("creates %q", r)
	}
}

func TestSyncPodResizeFailureIsReported(t *testing.T) {
	f := newResizeFixture(t)
	pod := resizePod(reqs("100m", "200m", "", ""))
	f.mustSync(pod)
	f.cri.FailUpdate("a", errors.New("no"))
	if err := f.sync(withSpec(pod, reqs("200m", "300m", "", ""))); err == nil {
		t.Fatal("sync did not report the failed resize")
	}
	if len(f.alloc.failed) != 1 || !strings.Contains(f.alloc.failed[0], "update resources of container a") {
		t.Fatalf("failures %q", f.alloc.failed)
	}
	if got := f.alloc.actuated["a"]; !got.Limits.Cpu().Equal(resource.MustParse("200m")) {
		t.Fatalf("a refused update was recorded as actuated: %v", got)
	}
}

// After each pod cgroup write of a resize the runtime hears what the pod holds, overhead apart, as
// from the kubelet; a runtime without the call, or refusing it, does not stop the resize.
func TestSyncPodResizeTellsTheSandbox(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"accepted", nil},
		{"unimplemented", status.Error(codes.Unimplemented, "no")},
		{"refused", status.Error(codes.Internal, "no")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newResizeFixture(t)
			pod := resizePod(reqs("100m", "200m", "64Mi", "128Mi"))
			pod.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("32Mi")}
			f.mustSync(pod)
			f.cri.ResetCalls()
			f.cri.FailSandboxUpdate(tc.err)
			f.mustSync(withSpec(pod, reqs("300m", "400m", "64Mi", "256Mi")))
			var got []string
			for _, c := range f.cri.CallsWithPrefix("UpdatePodSandboxResources ") {
				got = append(got, strings.Join(strings.Fields(c)[2:], " "))
			}
			const overhead = "overhead cpu=102/10000 mem=33554432"
			want := []string{
				"cpu=102/20000 mem=268435456 " + overhead, // memory raised, cpu as it was
				"cpu=102/40000 mem=268435456 " + overhead, // the quota raised
				"cpu=307/40000 mem=268435456 " + overhead, // the shares raised
			}
			if !slices.Equal(got, want) {
				t.Errorf("UpdatePodSandboxResources %q\nwant %q", got, want)
			}
			if len(f.alloc.failed) != 0 {
				t.Errorf("resize failures %q", f.alloc.failed)
			}
		})
	}
}
