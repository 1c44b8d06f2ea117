package kuberuntime

import (
	"math"

	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// sharesToMilliCPU turns cpu shares back into the millicores they were made from (rounded up, so
// a request survives the round trip); below the minimum shares there is no request.
func sharesToMilliCPU(shares int64) int64 {
	if shares < minShares {
		return 0
	}
	return int64(math.Ceil(float64(shares*milliCPUToCPU) / float64(sharesPerCPU)))
}

// quotaToMilliCPU turns a CFS quota and period into millicores; -1 (no quota) is none.
func quotaToMilliCPU(quota, period int64) int64 {
	if quota == -1 || period <= 0 {
		return 0
	}
	return quota * milliCPUToCPU / period
}

// toContainerResources reads the cpu request, cpu limit and memory limit a runtime reports in a
// container's status; nil when it reports none of them.
func toContainerResources(r *runtimeapi.ContainerResources) *kubecontainer.ContainerResources {
	l := r.GetLinux()
	if l == nil {
		return nil
	}
	var out kubecontainer.ContainerResources
	if l.CpuPeriod > 0 {
		if m := quotaToMilliCPU(l.CpuQuota, l.CpuPeriod); m > 0 {
			out.CPULimit = resource.NewMilliQuantity(m, resource.DecimalSI)
		}
	}
	if l.CpuShares > 0 {
		if m := sharesToMilliCPU(l.CpuShares); m > 0 {
			out.CPURequest = resource.NewMilliQuantity(m, resource.DecimalSI)
		}
	}
	if l.MemoryLimitInBytes > 0 {
		out.MemoryLimit = resource.NewQuantity(l.MemoryLimitInBytes, resource.BinarySI)
	}
	if out.CPULimit == nil && out.CPURequest == nil && out.MemoryLimit == nil {
		return nil
	}
	return &out
}
