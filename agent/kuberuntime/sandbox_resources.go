package kuberuntime

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/cm"
)

// sandboxResources are what the kubelet tells the runtime of the whole pod when it creates the
// sandbox: the summed resources of its containers, overhead excluded, and the RuntimeClass overhead
// apart. A runtime that places each container in the node's cgroups can ignore them, but one that
// boots a VM per pod must size it before any container exists: containerd hands both to its shim
// (the sandbox-cpu and sandbox-memory annotations Kata sizes its VM from). The pod cgroup, which
// holds the VM too, gets the overhead as well (qos.PodLimits).
func sandboxResources(pod *v1.Pod) (resources, overhead *runtimeapi.LinuxContainerResources) {
	opts := resourcehelper.PodResourcesOptions{ExcludeOverhead: true}
	req := resourcehelper.PodRequests(pod, opts)
	lim := resourcehelper.PodLimits(pod, opts)
	cpuReq := lim.Cpu()
	if q, ok := req[v1.ResourceCPU]; ok {
		cpuReq = &q
	}
	resources = sandboxLinuxResources(cpuReq, lim.Cpu(), lim.Memory())
	overhead = &runtimeapi.LinuxContainerResources{}
	if pod.Spec.Overhead != nil {
		// The overhead has no separate request and limit: it is reserved and capped alike.
		cpu := pod.Spec.Overhead.Cpu()
		overhead = sandboxLinuxResources(cpu, cpu, pod.Spec.Overhead.Memory())
	}
	return resources, overhead
}

// sandboxLinuxResources turns a cpu request and limit and a memory limit into cgroup figures as
// the kubelet does for a sandbox: shares from the request (the minimum when there is none), a CFS
// quota from the limit over the fixed 100ms period (0 without a limit), a memory limit when set.
func sandboxLinuxResources(cpuReq, cpuLim, memLim *resource.Quantity) *runtimeapi.LinuxContainerResources {
	return &runtimeapi.LinuxContainerResources{
		CpuShares:          int64(cm.MilliCPUToShares(cpuReq.MilliValue())),
		CpuPeriod:          cm.QuotaPeriod,
		CpuQuota:           cm.MilliCPUToQuota(cpuLim.MilliValue(), cm.QuotaPeriod),
		MemoryLimitInBytes: memLim.Value(),
	}
}
