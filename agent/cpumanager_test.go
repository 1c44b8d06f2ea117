package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/agent/admission"
	"github.com/nodelet/nodelet/agent/cm/cpumanager"
)

// cpuPod is a static pod; resources, when not empty, is its container's resources block.
const cpuPod = `apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox:1
    imagePullPolicy: IfNotPresent
%s`

func guaranteedPod(name, cpu string) string {
	return fmt.Sprintf(cpuPod, name, "    resources:\n      limits: {cpu: \""+cpu+"\", memory: 64Mi}\n")
}

func bestEffortPod(name string) string { return fmt.Sprintf(cpuPod, name, "") }

func fourCPUs() *cpumanager.Topology {
	t := &cpumanager.Topology{}
	for id := range 4 {
		t.CPUs = append(t.CPUs, cpumanager.CPU{ID: id, Core: id})
	}
	return t
}

// The static policy through the whole agent: a Guaranteed pod's container is created on its own
// CPU and the others on the shared pool without it; a restarted agent keeps the assignment; a
// pod asking for more than is free is refused with the kubelet's reason; when the Guaranteed pod
// goes, the shared containers are widened again through UpdateContainerResources.
func TestCPUManagerStaticPolicy(t *testing.T) {
	h := newHarness(t)
	h.cfg.Kubelet.CPUManagerPolicy = "static"
	h.cfg.Kubelet.ReservedSystemCPUs = "0"
	h.cfg.Kubelet.CPUManagerReconcilePeriod.Duration = 20e6 // 20ms
	deps := Deps{CPUTopology: fourCPUs()}
	h.start(deps)
	cpusetOf := func(pod string) string {
		for _, c := range h.running() {
			if c.Labels["io.kubernetes.pod.name"] == pod+"-node1" { // a static pod's name ends with the node's
				return h.cri.ContainerConfig(c.Id).GetLinux().GetResources().GetCpusetCpus()
			}
		}
		return "not running"
	}
	h.write("g.yaml", guaranteedPod("g", "1"))
	h.eventually("g running", func() bool { return cpusetOf("g") != "not running" })
	if got := cpusetOf("g"); got != "1" {
		t.Fatalf("guaranteed container created on %q, want its own cpu 1", got)
	}
	h.write("be.yaml", bestEffortPod("be"))
	h.eventually("be running", func() bool { return cpusetOf("be") != "not running" })
	if got := cpusetOf("be"); got != "0,2-3" {
		t.Fatalf("best-effort container created on %q, want the shared pool 0,2-3", got)
	}
	state, err := os.ReadFile(filepath.Join(h.cfg.RootDir, cpumanager.StateFile))
	if err != nil || !strings.Contains(string(state), `"policyName":"static"`) || !strings.Contains(string(state), `"defaultCpuSet":"0,2-3"`) {
		t.Fatalf("checkpoint %s: %v", state, err)
	}

	// A restart: the running containers stay where they are, and the checkpoint is kept.
	h.stop()
	h.cri.ResetCalls()
	h.start(deps)
	// A pod asking for more than is free is refused, with the kubelet's reason. (Asked of the
	// admission directly: a rejected static pod's status is dropped again at housekeeping, as it
	// is in no pod list, so polling for it would race with that.)
	big := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: "default", UID: "big-uid"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{
			Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("3"), v1.ResourceMemory: resource.MustParse("64Mi")}}}}}}
	err = h.agent.admission.Admit(big, h.agent.state.Pods())
	var ae *admission.Error
	if !errors.As(err, &ae) || ae.Reason != "UnexpectedAdmissionError" ||
		ae.Message != "Allocate failed due to not enough cpus available to satisfy request: requested=3, available=2, which is unexpected" {
		t.Fatalf("admitting a pod asking for 3 of 2 free CPUs: %v", err)
	}
	if got := h.cri.CallsWithPrefix("UpdateContainerResources"); len(got) != 0 {
		for _, c := range got {
			if !strings.HasSuffix(c, "cpuset=1") && !strings.HasSuffix(c, "cpuset=0,2-3") {
				t.Fatalf("a restart moved a container: %q", got)
			}
		}
	}

	// The Guaranteed pod goes: its CPU returns to the pool and the shared container follows.
	if err := os.Remove(filepath.Join(h.dir, "g.yaml")); err != nil {
		t.Fatal(err)
	}
	be := h.cri.RunningContainer("app")
	for _, c := range h.running() {
		if c.Labels["io.kubernetes.pod.name"] == "be-node1" {
			be = c.Id
		}
	}
	h.eventually("be widened to every CPU", func() bool {
		for _, c := range h.cri.CallsWithPrefix("UpdateContainerResources " + be) {
			if strings.HasSuffix(c, "cpuset=0-3") {
				return true
			}
		}
		return false
	})
	h.eventually("checkpoint without g", func() bool {
		b, _ := os.ReadFile(filepath.Join(h.cfg.RootDir, cpumanager.StateFile))
		return strings.Contains(string(b), `"defaultCpuSet":"0-3"`) && !strings.Contains(string(b), `"entries"`)
	})
}

// A static policy over a checkpoint the none policy wrote is refused, with the kubelet's words.
func TestCPUManagerPolicyChangeIsRefused(t *testing.T) {
	h := newHarness(t)
	h.start(Deps{})
	h.stop()
	h.cfg.Kubelet.CPUManagerPolicy = "static"
	h.cfg.Kubelet.ReservedSystemCPUs = "0"
	_, err := New(h.cfg, Deps{CPUTopology: fourCPUs()})
	if err == nil || !strings.Contains(err.Error(), `configured policy "static" differs from state checkpoint policy "none", please drain this node and delete the CPU manager checkpoint file`) {
		t.Fatalf("New: %v", err)
	}
}

// single-numa-node is accepted only where every allocation is on one NUMA node.
func TestSingleNUMANodeNeedsOneNode(t *testing.T) {
	h := newHarness(t)
	h.cfg.Kubelet.TopologyManagerPolicy = "single-numa-node"
	two := fourCPUs()
	two.CPUs[2].NUMANode, two.CPUs[3].NUMANode = 1, 1
	if _, err := New(h.cfg, Deps{CPUTopology: two}); err == nil || !strings.Contains(err.Error(), "topologyManagerPolicy: single-numa-node: this machine has 2 NUMA nodes") {
		t.Fatalf("two NUMA nodes: %v", err)
	}
	a, err := New(h.cfg, Deps{CPUTopology: fourCPUs()})
	if err != nil {
		t.Fatalf("one NUMA node: %v", err)
	}
	a.conn.Close()
}
