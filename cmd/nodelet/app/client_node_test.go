package app

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/agent/server"
	"github.com/nodelet/nodelet/test/harness/apitest"
)

type fakeNodeSource struct {
	node   *v1.Node
	events []v1.Event
}

func (f *fakeNodeSource) Node() (*v1.Node, bool) { return f.node.DeepCopy(), f.node != nil }
func (f *fakeNodeSource) NodeEvents() []v1.Event { return f.events }

// newNodeFixture is an agent API whose node is n1 (2 CPUs, 4Gi), running web (requests 500m and
// 1Gi, limits 1 and 2Gi) and a failed pod that holds nothing.
func newNodeFixture(t *testing.T) *clientFixture {
	t.Helper()
	f := apitest.NewFixture(t)
	fixClock(t)
	f.AddPod("default", "web", "nginx")
	f.Pods.Update("default", "web", func(p *v1.Pod) {
		p.Spec.Containers[0].Resources = v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("1Gi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("2Gi")},
		}
	})
	f.AddPod("default", "done", "job")
	f.Pods.Update("default", "done", func(p *v1.Pod) { p.Status.Phase = v1.PodFailed })
	now := apitest.Now
	res := v1.ResourceList{v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("4Gi"),
		v1.ResourcePods: resource.MustParse("110"), v1.ResourceEphemeralStorage: resource.MustParse("100Gi")}
	at := metav1.NewTime(now.Add(-10 * time.Minute))
	node := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: at, Labels: map[string]string{
			"kubernetes.io/hostname": "n1", "kubernetes.io/os": "linux", "node-role.kubernetes.io/edge": ""}},
		Spec: v1.NodeSpec{Taints: []v1.Taint{{Key: "example.com/gpu", Value: "yes", Effect: v1.TaintEffectNoSchedule}}},
		Status: v1.NodeStatus{
			Capacity: res, Allocatable: res,
			Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.10"}, {Type: v1.NodeHostName, Address: "n1"}},
			NodeInfo: v1.NodeSystemInfo{KernelVersion: "6.1.0-test", OSImage: "Debian GNU/Linux 13 (trixie)", OperatingSystem: "linux",
				Architecture: "amd64", ContainerRuntimeVersion: "nodelet://0.1.0", KubeletVersion: "v1.36.3-nodelet", BootID: "boot-1"},
			Conditions: []v1.NodeCondition{
				{Type: v1.NodeMemoryPressure, Status: v1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available",
					LastHeartbeatTime: at, LastTransitionTime: at},
				{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status",
					LastHeartbeatTime: at, LastTransitionTime: at},
			},
		},
	}
	started := metav1.NewTime(now.Add(-5 * time.Minute))
	src := &fakeNodeSource{node: node, events: []v1.Event{{Type: "Normal", Reason: "Starting", Message: "Starting kubelet.",
		Count: 1, FirstTimestamp: started, LastTimestamp: started, Source: v1.EventSource{Component: "kubelet"}}}}
	sock := f.ServeUnix(t, server.New(server.Deps{NodeName: "n1", Pods: f.Pods, Events: f.Pods, Runtime: f.Runtime, Node: src}))
	return &clientFixture{Fixture: f, endpoint: "unix://" + sock}
}

func TestClientGetNodes(t *testing.T) {
	f := newNodeFixture(t)
	ctx := context.Background()
	out, _, err := f.run(t, ctx, newGetCmd, nil, "nodes")
	if err != nil {
		t.Fatal(err)
	}
	if got := spaces.ReplaceAllString(out, " "); got != "NAME STATUS ROLES AGE VERSION\nn1 Ready edge 10m v1.36.3-nodelet\n" {
		t.Fatalf("table:\n%s", out)
	}
	out, _, err = f.run(t, ctx, newGetCmd, nil, "node", "n1", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	want := "NAME STATUS ROLES AGE VERSION INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION CONTAINER-RUNTIME\n" +
		"n1 Ready edge 10m v1.36.3-nodelet 192.0.2.10 <none> Debian GNU/Linux 13 (trixie) 6.1.0-test nodelet://0.1.0\n"
	if got := spaces.ReplaceAllString(out, " "); got != want {
		t.Fatalf("wide:\n%s", out)
	}
	out, _, err = f.run(t, ctx, newGetCmd, nil, "no", "n1", "-o", "json")
	var n v1.Node
	if err != nil || json.Unmarshal([]byte(out), &n) != nil || n.Kind != "Node" || n.Name != "n1" || len(n.Status.Conditions) != 2 {
		t.Fatalf("json: %v\n%s", err, out)
	}
	out, _, err = f.run(t, ctx, newGetCmd, nil, "nodes", "-o", "yaml")
	if err != nil || !strings.Contains(out, "kind: List") || !strings.Contains(out, "name: n1") {
		t.Fatalf("yaml: %v\n%s", err, out)
	}
	out, _, err = f.run(t, ctx, newGetCmd, nil, "nodes", "-o", "name")
	if err != nil || out != "node/n1\n" {
		t.Fatalf("name: %v %q", err, out)
	}
	if _, _, err := f.run(t, ctx, newGetCmd, nil, "nodes", "other"); err == nil || !strings.Contains(err.Error(), `nodes "other" not found`) {
		t.Fatalf("another node: %v", err)
	}
}

func TestClientDescribeNode(t *testing.T) {
	f := newNodeFixture(t)
	for _, args := range [][]string{{"node"}, {"nodes", "n1"}} {
		out, _, err := f.run(t, context.Background(), newDescribeCmd, nil, args...)
		if err != nil {
			t.Fatal(err)
		}
		flat := spaces.ReplaceAllString(out, " ")
		for _, want := range []string{
			"Name: n1\n", "Roles: edge\n", "Labels: kubernetes.io/hostname=n1\n kubernetes.io/os=linux\n node-role.kubernetes.io/edge=\n",
			"Annotations: <none>\n", "Taints: example.com/gpu=yes:NoSchedule\n", "Unschedulable: false\n",
			"Conditions:\n Type Status LastHeartbeatTime LastTransitionTime Reason Message\n ---- ------ ----------------- ------------------ ------ -------\n MemoryPressure False ",
			" Ready True ", "KubeletReady kubelet is posting ready status\n",
			"Addresses:\n InternalIP: 192.0.2.10\n Hostname: n1\n",
			"Capacity:\n cpu: 2\n ephemeral-storage: 100Gi\n memory: 4Gi\n pods: 110\n", "Allocatable:\n cpu: 2\n",
			"System Info:\n", " Boot ID: boot-1\n", " Kernel Version: 6.1.0-test\n", " OS Image: Debian GNU/Linux 13 (trixie)\n",
			" Container Runtime Version: nodelet://0.1.0\n", " Kubelet Version: v1.36.3-nodelet\n",
			"Non-terminated Pods: (1 in total)\n Namespace Name CPU Requests CPU Limits Memory Requests Memory Limits Age\n",
			" default web 500m (25%) 1 (50%) 1Gi (25%) 2Gi (50%) 5m\n",
			"Allocated resources:\n (Total limits may be over 100 percent, i.e., overcommitted.)\n Resource Requests Limits\n -------- -------- ------\n",
			" cpu 500m (25%) 1 (50%)\n memory 1Gi (25%) 2Gi (50%)\n ephemeral-storage 0 (0%) 0 (0%)\n",
			"Events:\n Type Reason Age From Message\n", " Normal Starting 5m kubelet Starting kubelet.\n",
		} {
			if !strings.Contains(flat, want) {
				t.Errorf("describe %v lacks %q:\n%s", args, want, out)
			}
		}
		if testing.Verbose() {
			t.Log("\n" + out)
		}
		if strings.Contains(flat, " done ") {
			t.Errorf("a failed pod is listed as holding resources:\n%s", out)
		}
	}
	if _, _, err := f.run(t, context.Background(), newDescribeCmd, nil, "node", "other"); err == nil {
		t.Fatal("another node was described")
	}
	if _, _, err := f.run(t, context.Background(), newDescribeCmd, nil, "pod"); err == nil {
		t.Fatal("describe pod without a name was accepted")
	}
}

func TestPodRequestsAndLimits(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	rl := func(cpu string) v1.ResourceRequirements {
		return v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}
	}
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers: []v1.Container{{Name: "big-init", Resources: rl("2")}, {Name: "sidecar", RestartPolicy: &always, Resources: rl("100m")}},
		Containers:     []v1.Container{{Name: "a", Resources: rl("200m")}, {Name: "b", Resources: rl("300m")}},
		Overhead:       v1.ResourceList{v1.ResourceCPU: resource.MustParse("10m")},
	}}
	r, _ := podRequestsAndLimits(pod)
	// The init container (2) runs alone, before the sidecar: it outweighs 600m of long-running ones.
	if cpu := r[v1.ResourceCPU]; cpu.MilliValue() != 2010 {
		t.Fatalf("cpu requests %v", cpu.String())
	}
	pod.Spec.InitContainers[0].Resources = rl("100m")
	r, _ = podRequestsAndLimits(pod)
	if cpu := r[v1.ResourceCPU]; cpu.MilliValue() != 610 {
		t.Fatalf("cpu requests %v", cpu.String())
	}
}
