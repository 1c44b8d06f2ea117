//go:build cluster

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestClusterResizeOnNodeletRuntime(t *testing.T) { resizeScenario(t, newEnv(t, onNodelet)) }
func TestClusterResizeOnContainerd(t *testing.T)     { resizeScenario(t, newEnv(t, onContainerd)) }

// resizeScenario resizes a running pod through the apiserver's resize subresource, as kubectl
// --subresource=resize does: container c (resizePolicy NotRequired) gets its new cpu and memory in
// place, container r (memory: RestartContainer) is restarted for its new memory; the containers'
// and the pod's cgroups hold the new limits, the status reports them as allocated and actual
// with no resize condition left, and a ResizeCompleted event is posted. A resize beyond the node's
// allocatable is PodResizePending Infeasible; one that does not fit beside another pod is Deferred
// and goes through once that pod is deleted; a memory limit below the container's usage is refused
// (PodResizeInProgress Error) until the usage goes down.
func resizeScenario(t *testing.T, e *env) {
	client := e.joinLoopbackCluster(t)
	ctx := context.Background()
	e.startAgent()
	e.eventually("node Ready", func() bool { return nodeCondition(ctx, client, v1.NodeReady) == v1.ConditionTrue })

	requirements := func(cpuReq, cpuLim, memReq, memLim string) v1.ResourceRequirements {
		return v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpuReq), v1.ResourceMemory: resource.MustParse(memReq)},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpuLim), v1.ResourceMemory: resource.MustParse(memLim)},
		}
	}
	grace := int64(2)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rz", Namespace: "default"},
		Spec: v1.PodSpec{NodeName: "e2e", HostNetwork: true, TerminationGracePeriodSeconds: &grace, Containers: []v1.Container{
			{Name: "c", Image: e.reg + "/busybox:1", Command: []string{"/bin/sh", "-c", loop},
				Resources: requirements("100m", "200m", "32Mi", "64Mi")},
			{Name: "r", Image: e.reg + "/busybox:1", Command: []string{"/bin/sh", "-c", loop},
				Resources:    requirements("100m", "200m", "32Mi", "64Mi"),
				ResizePolicy: []v1.ContainerResizePolicy{{ResourceName: v1.ResourceMemory, RestartPolicy: v1.RestartContainer}}},
		}}}
	created, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uid := created.UID
	// The apiserver takes a resize only of a pod whose running containers report their resources.
	e.eventually("the pod running with its resources reported", func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "rz", metav1.GetOptions{})
		if err != nil || p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) != 2 {
			return false
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running == nil || cs.Resources == nil {
				return false
			}
		}
		return true
	})

	resize := func(patch string) {
		t.Helper()
		if _, err := client.CoreV1().Pods("default").Patch(ctx, "rz", types.StrategicMergePatchType, []byte(patch),
			metav1.PatchOptions{}, "resize"); err != nil {
			t.Fatalf("resize %s: %v", patch, err)
		}
	}
	resize(`{"spec":{"containers":[
		{"name":"c","resources":{"requests":{"cpu":"150m","memory":"48Mi"},"limits":{"cpu":"300m","memory":"96Mi"}}},
		{"name":"r","resources":{"requests":{"cpu":"100m","memory":"48Mi"},"limits":{"cpu":"200m","memory":"96Mi"}}}]}}`)

	var last *v1.Pod
	e.eventually("the resize allocated, actuated and reported", func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "rz", metav1.GetOptions{})
		if err != nil {
			return false
		}
		last = p
		if resizeConditions(p) != "" || len(p.Status.ContainerStatuses) != 2 {
			return false
		}
		for _, cs := range p.Status.ContainerStatuses {
			want := map[string]string{"c": "150m 48Mi 300m 96Mi", "r": "100m 48Mi 200m 96Mi"}[cs.Name]
			if cs.State.Running == nil || cs.Resources == nil || figures(cs.AllocatedResources, cs.Resources.Limits) != want ||
				figures(cs.Resources.Requests, cs.Resources.Limits) != want {
				return false
			}
		}
		return true
	})
	for _, cs := range last.Status.ContainerStatuses {
		if want := map[string]int32{"c": 0, "r": 1}[cs.Name]; cs.RestartCount != want {
			t.Errorf("container %s restarted %d times, want %d (its resizePolicy)", cs.Name, cs.RestartCount, want)
		}
	}
	// The cgroups hold it: each container's, as the container sees it, and the pod's on the host.
	for _, name := range []string{"c", "r"} {
		id := runningContainer(t, e, "rz", name)
		if id == "" {
			t.Fatalf("container %s not running", name)
		}
		mem := strings.TrimSpace(e.exec(id, "/bin/sh", "-c", "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes"))
		if mem != fmt.Sprint(96<<20) {
			t.Errorf("container %s memory limit %s, want %d", name, mem, 96<<20)
		}
	}
	quota := strings.TrimSpace(e.exec(runningContainer(t, e, "rz", "c"), "/bin/sh", "-c",
		"cat /sys/fs/cgroup/cpu.max 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us"))
	if !strings.HasPrefix(quota, "30000") {
		t.Errorf("container c cpu quota %q, want 30000 (300m)", quota)
	}
	if got := podCgroupMemoryLimit(t, e, uid); got != fmt.Sprint(192<<20) {
		t.Errorf("pod cgroup memory limit %s, want %d (the containers' sum)", got, 192<<20)
	}
	e.eventually("a ResizeCompleted event", func() bool { return hasEvent(ctx, client, "rz", "ResizeCompleted") })

	// The agent restarts: what it allocated and actuated is checkpointed, so the pod is admitted
	// with its allocation and nothing is resized or restarted again.
	ids := map[string]string{"c": runningContainer(t, e, "rz", "c"), "r": runningContainer(t, e, "rz", "r")}
	e.killAgent()
	e.startAgent()
	e.eventually("the restarted agent synced the pod", func() bool {
		p, ok := e.agent.PodState().Pod("default", "rz")
		if !ok || p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) != 2 {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		return cs.AllocatedResources.Memory().String() == "48Mi" && cs.Resources != nil
	})
	p, _ := e.agent.PodState().Pod("default", "rz")
	if c := resizeConditions(p); c != "" {
		t.Errorf("resize condition %q after the agent restarted", c)
	}
	for name, id := range ids {
		if now := runningContainer(t, e, "rz", name); now != id {
			t.Errorf("container %s is %s after the agent restarted, was %s", name, now, id)
		}
	}

	// Beyond the node's allocatable: Infeasible, and the pod keeps what it has.
	node, err := client.CoreV1().Nodes().Get(ctx, "e2e", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	allocCPU := node.Status.Allocatable.Cpu().MilliValue()
	resize(fmt.Sprintf(`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"%dm"},"limits":{"cpu":"%dm"}}}]}}`,
		2*allocCPU, 2*allocCPU))
	e.eventually("PodResizePending Infeasible", func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "rz", metav1.GetOptions{})
		if err != nil || resizeConditions(p) != "PodResizePending/Infeasible" {
			return false
		}
		last = p
		return true
	})
	if msg := conditionMessage(last, v1.PodResizePending); !strings.HasPrefix(msg, "Node didn't have enough capacity: cpu, requested: ") {
		t.Errorf("infeasible message %q", msg)
	}
	if a := last.Status.ContainerStatuses[0].AllocatedResources.Cpu().String(); a != "150m" {
		t.Errorf("allocated cpu %s while infeasible, want the 150m held", a)
	}

	// Does not fit beside another pod: Deferred, until that pod goes.
	hogCPU := allocCPU - 150 - 100 - 100 // rz holds 250m; leave 100m
	hog := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hog", Namespace: "default"},
		Spec: v1.PodSpec{NodeName: "e2e", HostNetwork: true, TerminationGracePeriodSeconds: &grace, Containers: []v1.Container{
			{Name: "c", Image: e.reg + "/busybox:1", Command: []string{"/bin/sh", "-c", loop},
				Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(hogCPU, resource.DecimalSI)}}}}}}
	if _, err := client.CoreV1().Pods("default").Create(ctx, hog, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the other pod running", func() bool { return podPhase(ctx, client, "hog") == v1.PodRunning })
	resize(`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"400m"},"limits":{"cpu":"400m"}}}]}}`)
	e.eventually("PodResizePending Deferred", func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "rz", metav1.GetOptions{})
		if err != nil || resizeConditions(p) != "PodResizePending/Deferred" {
			return false
		}
		last = p
		return true
	})
	if msg := conditionMessage(last, v1.PodResizePending); !strings.HasPrefix(msg, "Node didn't have enough resource: cpu") {
		t.Errorf("deferred message %q", msg)
	}
	zero := int64(0)
	if err := client.CoreV1().Pods("default").Delete(ctx, "hog", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the deferred resize done once the other pod went", func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "rz", metav1.GetOptions{})
		if err != nil || resizeConditions(p) != "" {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		return cs.Name == "c" && cs.Resources != nil && cs.AllocatedResources.Cpu().String() == "400m" &&
			cs.Resources.Limits.Cpu().String() == "400m"
	})

	// A memory limit below what the container uses is refused before anything changes
	// (PodResizeInProgress, reason Error), and applied once the usage has gone down.
	c := runningContainer(t, e, "rz", "c")
	e.exec(c, "/bin/sh", "-c", "dd if=/dev/zero of=/dev/shm/fill bs=1048576 count=64 2>/dev/null || dd if=/dev/zero of=/tmp/fill bs=1048576 count=64")
	resize(`{"spec":{"containers":[{"name":"c","resources":{"requests":{"memory":"16Mi"},"limits":{"memory":"40Mi"}}}]}}`)
	e.eventually("PodResizeInProgress Error", func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "rz", metav1.GetOptions{})
		if err != nil || resizeConditions(p) != "PodResizeInProgress/Error" {
			return false
		}
		last = p
		return true
	})
	want := fmt.Sprintf(`cannot decrease memory limits: attempting to set container "c" memory limit (%d) below current usage (`, 40<<20)
	if msg := conditionMessage(last, v1.PodResizeInProgress); !strings.HasPrefix(msg, want) {
		t.Errorf("error message %q, want it to start with %q", msg, want)
	}
	if mem := strings.TrimSpace(e.exec(c, "/bin/sh", "-c", "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes")); mem != fmt.Sprint(96<<20) {
		t.Errorf("memory limit %s after a refused decrease, want %d kept", mem, 96<<20)
	}
	e.exec(c, "/bin/rm", "-f", "/dev/shm/fill", "/tmp/fill")
	e.eventually("the decrease applied once the usage went down", func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "rz", metav1.GetOptions{})
		if err != nil || resizeConditions(p) != "" {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		return cs.Resources != nil && cs.Resources.Limits.Memory().String() == "40Mi"
	})
	if mem := strings.TrimSpace(e.exec(c, "/bin/sh", "-c", "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes")); mem != fmt.Sprint(40<<20) {
		t.Errorf("memory limit %s, want %d", mem, 40<<20)
	}

	// Through all of it, agent restart included, only the resizePolicy restart happened.
	if p, err := client.CoreV1().Pods("default").Get(ctx, "rz", metav1.GetOptions{}); err == nil {
		for _, cs := range p.Status.ContainerStatuses {
			if want := map[string]int32{"c": 0, "r": 1}[cs.Name]; cs.RestartCount != want {
				t.Errorf("container %s restarted %d times in all, want %d", cs.Name, cs.RestartCount, want)
			}
		}
	}

	if err := client.CoreV1().Pods("default").Delete(ctx, "rz", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	e.eventually("pods gone from the runtime", func() bool { return len(e.allSandboxes()) == 0 })
}

// figures are "cpuRequest memoryRequest cpuLimit memoryLimit".
func figures(requests, limits v1.ResourceList) string {
	return fmt.Sprintf("%s %s %s %s", requests.Cpu(), requests.Memory(), limits.Cpu(), limits.Memory())
}

// resizeConditions names the pod's resize conditions, "type/reason", "" for none.
func resizeConditions(p *v1.Pod) string {
	var out []string
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodResizePending || c.Type == v1.PodResizeInProgress {
			out = append(out, string(c.Type)+"/"+c.Reason)
		}
	}
	return strings.Join(out, " ")
}

func conditionMessage(p *v1.Pod, typ v1.PodConditionType) string {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Message
		}
	}
	return ""
}

func hasEvent(ctx context.Context, client kubernetes.Interface, pod, reason string) bool {
	evs, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		return false
	}
	for _, ev := range evs.Items {
		if ev.InvolvedObject.Name == pod && ev.Reason == reason {
			return true
		}
	}
	return false
}

// runningContainer is the ID of the running container name of the apiserver pod (named without
// the node suffix static pods get), "" when there is none.
func runningContainer(t testing.TB, e *env, pod, name string) string {
	resp, err := e.rt.Runtime.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.name": pod, "io.kubernetes.container.name": name}}})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	for _, c := range resp.Containers {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			return c.Id
		}
	}
	return ""
}

// podCgroupMemoryLimit reads the Burstable pod's cgroup memory limit on the host (v2 or v1).
func podCgroupMemoryLimit(t testing.TB, e *env, uid types.UID) string {
	rel := filepath.Join(e.cfg.PodsCgroup, "burstable", "pod"+string(uid))
	for _, f := range []string{filepath.Join("/sys/fs/cgroup", rel, "memory.max"),
		filepath.Join("/sys/fs/cgroup/memory", rel, "memory.limit_in_bytes")} {
		if b, err := os.ReadFile(f); err == nil {
			return strings.TrimSpace(string(b))
		}
	}
	t.Fatalf("no memory limit file for the pod cgroup %s", rel)
	return ""
}
