package podsync

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/agent/allocation"
	"github.com/nodelet/nodelet/agent/kuberuntime"
	"github.com/nodelet/nodelet/agent/podworkers"
)

func resizeCondition(s v1.PodStatus) string {
	for _, c := range s.Conditions {
		if c.Type == v1.PodResizePending || c.Type == v1.PodResizeInProgress {
			return string(c.Type) + "/" + c.Reason
		}
	}
	return ""
}

// A resize goes from the spec to the runtime and back into the status through one worker sync.
func TestSyncPodResizesAsAllocated(t *testing.T) {
	s, cri, st := newSyncer(t)
	cri.AddImage("busybox:1")
	pod := apiPod("")
	pod.Spec.RestartPolicy = v1.RestartPolicyAlways
	pod.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")},
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("200m")},
	}
	active := []*v1.Pod{pod}
	alloc, err := allocation.New(allocation.Deps{RootDir: t.TempDir(), ActivePods: func() []*v1.Pod { return active },
		Allocatable: func() v1.ResourceList { return v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")} }})
	if err != nil {
		t.Fatal(err)
	}
	s.Allocation = alloc
	s.Runtime.(*kuberuntime.Manager).Allocation = alloc
	if err := alloc.AddPod(pod, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SyncPod(context.Background(), podworkers.SyncPodCreate, pod, nil); err != nil {
		t.Fatal(err)
	}

	resized := pod.DeepCopy()
	resized.Generation = 2
	resized.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("300m")
	resized.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = resource.MustParse("400m")
	active = []*v1.Pod{resized}
	if _, err := s.SyncPod(context.Background(), podworkers.SyncPodUpdate, resized, nil); err != nil {
		t.Fatal(err)
	}
	if calls := cri.CallsWithPrefix("UpdateContainerResources"); len(calls) != 1 || !strings.Contains(calls[0], " c cpu=307/40000 mem=0 ") {
		t.Fatalf("updates %q", calls)
	}
	got, _ := st.GetPodStatus(pod.UID)
	cs := got.ContainerStatuses[0]
	if cs.AllocatedResources.Cpu().String() != "300m" || cs.Resources == nil || cs.Resources.Limits.Cpu().String() != "400m" ||
		cs.Resources.Requests.Cpu().String() != "300m" {
		t.Fatalf("container status resources %v allocated %v", cs.Resources, cs.AllocatedResources)
	}
	if c := resizeCondition(got); c != "" {
		t.Fatalf("resize condition %q after the resize completed", c)
	}

	// More than the node has: infeasible, nothing changes in the runtime, the old allocation stays.
	huge := resized.DeepCopy()
	huge.Generation = 3
	huge.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("3")
	huge.Spec.Containers[0].Resources.Limits[v1.ResourceCPU] = resource.MustParse("3")
	active = []*v1.Pod{huge}
	cri.ResetCalls()
	if _, err := s.SyncPod(context.Background(), podworkers.SyncPodUpdate, huge, nil); err != nil {
		t.Fatal(err)
	}
	if calls := cri.CallsWithPrefix("UpdateContainerResources"); len(calls) != 0 {
		t.Fatalf("updates %q for an infeasible resize", calls)
	}
	got, _ = st.GetPodStatus(pod.UID)
	if c := resizeCondition(got); c != "PodResizePending/Infeasible" {
		t.Fatalf("resize condition %q", c)
	}
	if a := got.ContainerStatuses[0].AllocatedResources.Cpu().String(); a != "300m" {
		t.Fatalf("allocated cpu %s, want the 300m still held", a)
	}
}
