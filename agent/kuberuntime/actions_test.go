package kuberuntime

import (
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/internal/backoff"
	"github.com/nodelet/nodelet/agent/kubecontainer"
)

func testPod(policy v1.RestartPolicy, inits []string, apps ...string) *v1.Pod {
	pod := &v1.Pod{}
	pod.Name, pod.Namespace, pod.UID = "web", "default", "uid-1"
	pod.Spec.RestartPolicy = policy
	for _, n := range inits {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: n, Image: "busybox"})
	}
	for _, n := range apps {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n, Image: "busybox"})
	}
	return pod
}

func sandbox(id string, attempt uint32, ready bool) *runtimeapi.PodSandboxStatus {
	st := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	if ready {
		st = runtimeapi.PodSandboxState_SANDBOX_READY
	}
	return &runtimeapi.PodSandboxStatus{Id: id, State: st, Metadata: &runtimeapi.PodSandboxMetadata{Attempt: attempt},
		Network: &runtimeapi.PodSandboxNetworkStatus{Ip: "10.0.0.2"}}
}

func running(pod *v1.Pod, name string) *kubecontainer.Status {
	return &kubecontainer.Status{ID: "id-" + name, Name: name, State: kubecontainer.StateRunning, Hash: HashContainer(findSpec(pod, name))}
}

func exited(pod *v1.Pod, name string, code int32) *kubecontainer.Status {
	return &kubecontainer.Status{ID: "id-" + name, Name: name, State: kubecontainer.StateExited, ExitCode: code, Hash: HashContainer(findSpec(pod, name))}
}

func TestComputePodActions(t *testing.T) {
	always := testPod(v1.RestartPolicyAlways, nil, "a", "b")
	never := testPod(v1.RestartPolicyNever, nil, "a", "b")
	onFailure := testPod(v1.RestartPolicyOnFailure, nil, "a", "b")
	withInit := testPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a")
	neverInit := testPod(v1.RestartPolicyNever, []string{"i1"}, "a")
	onFailureInit := testPod(v1.RestartPolicyOnFailure, []string{"i1"}, "a")
	changed := testPod(v1.RestartPolicyAlways, nil, "a", "b")
	changedSpec := changed.DeepCopy()
	changedSpec.Spec.Containers[0].Image = "busybox:2"
	hostNet := testPod(v1.RestartPolicyAlways, nil, "a")
	hostNet.Spec.HostNetwork = true

	sidecar := testPod(v1.RestartPolicyNever, []string{"side", "i2"}, "a")
	alwaysPolicy := v1.ContainerRestartPolicyAlways
	sidecar.Spec.InitContainers[0].RestartPolicy = &alwaysPolicy

	status := func(sbs []*runtimeapi.PodSandboxStatus, cs ...*kubecontainer.Status) *kubecontainer.PodStatus {
		return &kubecontainer.PodStatus{ID: "uid-1", SandboxStatuses: sbs, ContainerStatuses: cs}
	}
	ready := []*runtimeapi.PodSandboxStatus{sandbox("sb1", 0, true)}
	dead := []*runtimeapi.PodSandboxStatus{sandbox("sb1", 0, false)}
	noKill := map[string]containerToKill{}

	tests := []struct {
		name   string
		pod    *v1.Pod
		status *kubecontainer.PodStatus
		want   podActions
	}{
		{"new pod: sandbox then all containers", always, status(nil),
			podActions{KillPod: true, CreateSandbox: true, ContainersToStart: []int{0, 1}, ContainersToKill: noKill}},
		{"all running: nothing to do", always, status(ready, running(always, "a"), running(always, "b")),
			podActions{SandboxID: "sb1", ContainersToKill: noKill}},
		{"one exited with Always: restart it", always, status(ready, running(always, "a"), exited(always, "b", 0)),
			podActions{SandboxID: "sb1", ContainersToStart: []int{1}, ContainersToKill: noKill}},
		{"one failed with Never: leave it", never, status(ready, running(never, "a"), exited(never, "b", 1)),
			podActions{SandboxID: "sb1", ContainersToKill: noKill}},
		{"all exited with Never: pod done, kill sandbox", never, status(ready, exited(never, "a", 0), exited(never, "b", 1)),
			podActions{KillPod: true, SandboxID: "sb1", ContainersToKill: noKill}},
		{"OnFailure restarts only the failed", onFailure, status(ready, exited(onFailure, "a", 0), exited(onFailure, "b", 2)),
			podActions{SandboxID: "sb1", ContainersToStart: []int{1}, ContainersToKill: noKill}},
		{"OnFailure all succeeded: pod done", onFailure, status(ready, exited(onFailure, "a", 0), exited(onFailure, "b", 0)),
			podActions{KillPod: true, SandboxID: "sb1", ContainersToKill: noKill}},
		{"sandbox died: recreate with next attempt", always, status(dead, exited(always, "a", 137), exited(always, "b", 137)),
			podActions{KillPod: true, CreateSandbox: true, SandboxID: "sb1", Attempt: 1, ContainersToStart: []int{0, 1}, ContainersToKill: noKill}},
		{"sandbox died with Never after running: no new sandbox", never, status(dead, exited(never, "a", 137)),
			podActions{KillPod: true, SandboxID: "sb1", Attempt: 1, ContainersToKill: noKill}},
		{"sandbox died with OnFailure: succeeded containers are not rerun", onFailure, status(dead, exited(onFailure, "a", 0), exited(onFailure, "b", 137)),
			podActions{KillPod: true, CreateSandbox: true, SandboxID: "sb1", Attempt: 1, ContainersToStart: []int{1}, ContainersToKill: noKill}},
		{"sandbox died with OnFailure, all succeeded after init: no new sandbox, no init rerun", onFailureInit,
			status(dead, exited(onFailureInit, "i1", 0), exited(onFailureInit, "a", 0)),
			podActions{KillPod: true, SandboxID: "sb1", Attempt: 1, ContainersToKill: noKill}},
		{"sandbox died before any app container: init containers again", onFailureInit, status(dead, exited(onFailureInit, "i1", 1)),
			podActions{KillPod: true, CreateSandbox: true, SandboxID: "sb1", Attempt: 1,
				NextInitContainerToStart: &onFailureInit.Spec.InitContainers[0], ContainersToKill: noKill}},
		{"two ready sandboxes: replace", always, status([]*runtimeapi.PodSandboxStatus{sandbox("sb2", 1, true), sandbox("sb1", 0, true)}),
			podActions{KillPod: true, CreateSandbox: true, SandboxID: "sb2", Attempt: 2, ContainersToStart: []int{0, 1}, ContainersToKill: noKill}},
		{"host network changed: replace sandbox", hostNet, status(ready, running(hostNet, "a")),
			podActions{KillPod: true, CreateSandbox: true, SandboxID: "sb1", Attempt: 1, ContainersToStart: []int{0}, ContainersToKill: noKill}},
		{"new pod with init containers: first init only", withInit, status(nil),
			podActions{KillPod: true, CreateSandbox: true, NextInitContainerToStart: &withInit.Spec.InitContainers[0], ContainersToKill: noKill}},
		{"first init running: wait", withInit, status(ready, running(withInit, "i1")),
			podActions{SandboxID: "sb1", ContainersToKill: noKill}},
		{"first init done: start second", withInit, status(ready, exited(withInit, "i1", 0)),
			podActions{SandboxID: "sb1", NextInitContainerToStart: &withInit.Spec.InitContainers[1], ContainersToKill: noKill}},
		{"init failed with Always: rerun it", withInit, status(ready, exited(withInit, "i1", 1)),
			podActions{SandboxID: "sb1", NextInitContainerToStart: &withInit.Spec.InitContainers[0], ContainersToKill: noKill}},
		{"init failed with Never: pod fails", neverInit, status(ready, exited(neverInit, "i1", 1)),
			podActions{KillPod: true, SandboxID: "sb1", ContainersToKill: noKill}},
		{"inits done: start apps", withInit, status(ready, exited(withInit, "i2", 0), exited(withInit, "i1", 0)),
			podActions{SandboxID: "sb1", ContainersToStart: []int{0}, ContainersToKill: noKill}},
		{"spec changed: kill and restart", changedSpec, status(ready, running(changed, "a"), running(changed, "b")),
			podActions{SandboxID: "sb1", ContainersToStart: []int{0}, ContainersToKill: map[string]containerToKill{
				"id-a": {Name: "a", Spec: &changedSpec.Spec.Containers[0], Message: "container a definition changed, will be restarted"}}}},
		{"container removed from spec: kill it", testPod(v1.RestartPolicyAlways, nil, "a"), status(ready, running(always, "a"), running(always, "b")),
			podActions{SandboxID: "sb1", ContainersToKill: map[string]containerToKill{
				"id-b": {Name: "b", Message: "container is no longer in the pod spec"}}}},
		{"sidecar not started: start it first", sidecar, status(ready),
			podActions{SandboxID: "sb1", NextInitContainerToStart: &sidecar.Spec.InitContainers[0], ContainersToKill: noKill}},
		{"sidecar running: next init starts", sidecar, status(ready, running(sidecar, "side")),
			podActions{SandboxID: "sb1", NextInitContainerToStart: &sidecar.Spec.InitContainers[1], ContainersToKill: noKill}},
		{"sidecar running, inits done: apps start", sidecar, status(ready, running(sidecar, "side"), exited(sidecar, "i2", 0)),
			podActions{SandboxID: "sb1", ContainersToStart: []int{0}, ContainersToKill: noKill}},
		{"sidecar died: restarted even with Never", sidecar, status(ready, exited(sidecar, "side", 1), exited(sidecar, "i2", 0), running(sidecar, "a")),
			podActions{SandboxID: "sb1", NextInitContainerToStart: &sidecar.Spec.InitContainers[0], ContainersToKill: noKill}},
		{"apps done with sidecar running: pod done", sidecar, status(ready, running(sidecar, "side"), exited(sidecar, "i2", 0), exited(sidecar, "a", 0)),
			podActions{KillPod: true, SandboxID: "sb1", ContainersToKill: noKill}},
		{"created but never started: start", always, status(ready, running(always, "a"),
			&kubecontainer.Status{ID: "id-b", Name: "b", State: kubecontainer.StateCreated}),
			podActions{SandboxID: "sb1", ContainersToStart: []int{1}, ContainersToKill: noKill}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := computePodActions(tt.pod, tt.status, nil, nil)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("computePodActions:\n got %s %+v\nwant %s %+v", got, got.ContainersToKill, tt.want, tt.want.ContainersToKill)
			}
		})
	}
}

func TestBackOff(t *testing.T) {
	now := time.Unix(1000, 0)
	b := backoff.New(backOffInitial, backOffMax, func() time.Time { return now })
	var delays []time.Duration
	for i := 0; i < 7; i++ {
		b.Next("k", now)
		delays = append(delays, b.Get("k"))
	}
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second}
	if !reflect.DeepEqual(delays, want) {
		t.Fatalf("delays %v, want %v", delays, want)
	}
	if in, _ := b.InBackOffSince("k", now); !in {
		t.Fatal("not in back-off right after a failure")
	}
	now = now.Add(301 * time.Second)
	if in, _ := b.InBackOffSince("k", now.Add(-301*time.Second)); in {
		t.Fatal("still in back-off after the delay")
	}
	// Ten quiet minutes (it ran that long) start the count again.
	now = now.Add(10 * time.Minute)
	b.Next("k", now)
	if got := b.Get("k"); got != backOffInitial {
		t.Fatalf("after a quiet 10m delay is %v, want %v", got, backOffInitial)
	}
}

type unhealthy map[string]string

func (u unhealthy) Unhealthy(id string) (bool, string) { why, ok := u[id]; return ok, why }

func TestComputePodActionsLiveness(t *testing.T) {
	always := testPod(v1.RestartPolicyAlways, nil, "a", "b")
	never := testPod(v1.RestartPolicyNever, nil, "a", "b")
	ready := []*runtimeapi.PodSandboxStatus{sandbox("sb1", 0, true)}
	status := func(pod *v1.Pod) *kubecontainer.PodStatus {
		return &kubecontainer.PodStatus{ID: "uid-1", SandboxStatuses: ready, ContainerStatuses: []*kubecontainer.Status{running(pod, "a"), running(pod, "b")}}
	}
	bad := unhealthy{"id-a": "failed liveness probe"}
	tests := []struct {
		name string
		pod  *v1.Pod
		want podActions
	}{
		{"liveness failed: kill and restart", always, podActions{SandboxID: "sb1", ContainersToStart: []int{0}, ContainersToKill: map[string]containerToKill{
			"id-a": {Name: "a", Spec: &always.Spec.Containers[0], Message: "container a failed liveness probe, will be restarted"}}}},
		{"liveness failed with Never: kill only", never, podActions{SandboxID: "sb1", ContainersToKill: map[string]containerToKill{
			"id-a": {Name: "a", Spec: &never.Spec.Containers[0], Message: "container a failed liveness probe"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := computePodActions(tt.pod, status(tt.pod), bad, nil); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %s %+v\nwant %s %+v", got, got.ContainersToKill, tt.want, tt.want.ContainersToKill)
			}
		})
	}
}
