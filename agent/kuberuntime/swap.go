package kuberuntime

import (
	"sync"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/cgroupfs"
)

// cgroup2SwapMax is the cgroup v2 file bounding a cgroup's swap, sent in LinuxContainerResources.unified.
const cgroup2SwapMax = "memory.swap.max"

// SwapController is what this host's memory cgroups can bound of swap.
type SwapController struct {
	Unified bool // cgroup v2
	// Available: the kernel accounts swap in memory cgroups (v1 memory.memsw.*, v2 memory.swap.*):
	// without it no swap limit can be written, and none is sent.
	Available bool
}

// hostSwap is read once: neither the cgroup version nor swap accounting changes without a reboot.
var hostSwap = sync.OnceValue(func() SwapController {
	return detectSwapController(cgroupfs.Host(), "/proc/self/cgroup")
})

// detectSwapController looks where the kubelet does: v1 at the memory hierarchy's root; v2 in the
// agent's own cgroup (selfCgroup, its /proc/self/cgroup), since the root cgroup has no memory.swap.max.
func detectSwapController(fs cgroupfs.FS, selfCgroup string) SwapController {
	return SwapController{Unified: fs.Unified(), Available: fs.SwapAccounting(selfCgroup)}
}

// noSwap gives the container the kubelet's NoSwap, the only memorySwap.swapBehavior the agent
// takes (LimitedSwap is refused at start): on cgroup v1 a memory+swap limit equal to the memory
// limit, so none of it can be swap (nothing when there is no memory limit: v1 cannot bound swap
// alone, and 0 is no limit to a runtime); on cgroup v2 memory.swap.max 0, whatever the limits.
// Where the kernel does not account swap nothing is sent, as with the kubelet. The pod's QoS class
// matters only through the memory limit it implies.
func noSwap(r *runtimeapi.LinuxContainerResources, sw SwapController) *runtimeapi.LinuxContainerResources {
	if !sw.Available {
		return r
	}
	if !sw.Unified {
		r.MemorySwapLimitInBytes = r.MemoryLimitInBytes
		return r
	}
	if r.Unified == nil {
		r.Unified = map[string]string{}
	}
	r.Unified[cgroup2SwapMax] = "0"
	return r
}

// containerResources are the cgroup figures a container of the pod is created or updated with.
func (m *Manager) containerResources(pod *v1.Pod, c *v1.Container) *runtimeapi.LinuxContainerResources {
	return noSwap(linuxResources(pod, c), hostSwap())
}
