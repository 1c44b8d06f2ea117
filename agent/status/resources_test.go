package status

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

func q(s string) *resource.Quantity { v := resource.MustParse(s); return &v }

func TestStatusResources(t *testing.T) {
	spec := &v1.Container{Name: "c", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("256Mi")},
	}}
	running := func(r *kubecontainer.ContainerResources) *kubecontainer.Status {
		return &kubecontainer.Status{ID: "x", Name: "c", State: kubecontainer.StateRunning, Resources: r}
	}
	oldRunning := &v1.ContainerStatus{Name: "c", ContainerID: "cri://x", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}},
		Resources: &v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("300m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		}}
	actuated := func(string) (v1.ResourceRequirements, bool) {
		return v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("100Mi")}}, true
	}
	rl := func(cpu, mem string) v1.ResourceList {
		return v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu), v1.ResourceMemory: resource.MustParse(mem)}
	}
	for _, tc := range []struct {
		name     string
		cur      *kubecontainer.Status
		old      *v1.ContainerStatus
		actuated func(string) (v1.ResourceRequirements, bool)
		want     v1.ResourceRequirements
	}{
		{name: "not running: the allocation", cur: &kubecontainer.Status{ID: "x", State: kubecontainer.StateExited,
			Resources: &kubecontainer.ContainerResources{CPULimit: q("2")}}, want: spec.Resources},
		{name: "running, the runtime reports: its figures", cur: running(&kubecontainer.ContainerResources{
			CPURequest: q("400m"), CPULimit: q("800m"), MemoryLimit: q("200Mi")}),
			want: v1.ResourceRequirements{Requests: rl("400m", "128Mi"), Limits: rl("800m", "200Mi")}},
		{name: "running, nothing reported, no old status: the allocation", cur: running(nil), want: spec.Resources},
		{name: "running, nothing reported: the same container's old figures", cur: running(nil), old: oldRunning,
			want: v1.ResourceRequirements{Requests: rl("250m", "128Mi"), Limits: rl("300m", "64Mi")}},
		{name: "old figures of another container are not kept", cur: running(nil),
			old:  func() *v1.ContainerStatus { o := oldRunning.DeepCopy(); o.ContainerID = "cri://y"; return o }(),
			want: spec.Resources},
		{name: "memory request from the actuated record", cur: running(nil), actuated: actuated,
			want: v1.ResourceRequirements{Requests: rl("500m", "100Mi"), Limits: rl("1", "256Mi")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := statusResources(spec, tc.cur, "cri://x", tc.old, tc.actuated)
			if !apiequality.Semantic.DeepEqual(*got, tc.want) {
				t.Fatalf("resources = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestMinimalCPUFiguresKeepAllocation(t *testing.T) {
	spec := &v1.Container{Name: "c", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1m")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("5m")},
	}}
	cur := &kubecontainer.Status{ID: "x", State: kubecontainer.StateRunning,
		Resources: &kubecontainer.ContainerResources{CPURequest: q("2m"), CPULimit: q("10m")}}
	got := statusResources(spec, cur, "cri://x", nil, nil)
	if !apiequality.Semantic.DeepEqual(*got, spec.Resources) {
		t.Fatalf("resources = %v, want the allocation %v", got, spec.Resources)
	}
}

func TestGenerateResizeStatus(t *testing.T) {
	pod := &v1.Pod{}
	pod.UID, pod.Name, pod.Namespace = "u", "p", "default"
	pod.Spec.Containers = []v1.Container{{Name: "c", Image: "busybox", Resources: v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m")}}}}
	ps := &kubecontainer.PodStatus{ID: "u", ContainerStatuses: []*kubecontainer.Status{
		{ID: "x", Name: "c", State: kubecontainer.StateRunning, Resources: &kubecontainer.ContainerResources{CPURequest: q("100m")}}}}
	pending := v1.PodCondition{Type: v1.PodResizePending, Status: v1.ConditionTrue, Reason: v1.PodReasonDeferred, Message: "no room"}
	old := v1.PodStatus{Conditions: []v1.PodCondition{{Type: v1.PodResizeInProgress, Status: v1.ConditionTrue}}}
	s := Generate(pod, ps, old, Inputs{Reasons: kubecontainer.NewReasonCache(), Now: time.Unix(100, 0),
		ResizeConditions: []v1.PodCondition{pending}})
	cs := s.ContainerStatuses[0]
	if got := cs.AllocatedResources.Cpu().String(); got != "200m" {
		t.Fatalf("allocatedResources cpu = %s", got)
	}
	if got := cs.Resources.Requests.Cpu().String(); got != "100m" {
		t.Fatalf("resources cpu request = %s, want the runtime's 100m", got)
	}
	var found []v1.PodConditionType
	for _, c := range s.Conditions {
		if c.Type == v1.PodResizePending || c.Type == v1.PodResizeInProgress {
			found = append(found, c.Type)
		}
	}
	if len(found) != 1 || found[0] != v1.PodResizePending {
		t.Fatalf("resize conditions = %v, want only the given PodResizePending (the old in-progress one is the agent's to drop)", found)
	}
}
