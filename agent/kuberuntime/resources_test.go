package kuberuntime

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestToContainerResources(t *testing.T) {
	str := func(q *resource.Quantity) string {
		if q == nil {
			return "-"
		}
		return q.String()
	}
	for _, tc := range []struct {
		name                string
		in                  *runtimeapi.ContainerResources
		cpuReq, cpuLim, mem string
		none                bool
	}{
		{name: "nothing reported", in: nil, none: true},
		{name: "no linux figures", in: &runtimeapi.ContainerResources{}, none: true},
		{name: "all", in: &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{
			CpuShares: 256, CpuQuota: 50000, CpuPeriod: 100000, MemoryLimitInBytes: 128 << 20}},
			cpuReq: "250m", cpuLim: "500m", mem: "128Mi"},
		{name: "no quota", in: &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{
			CpuShares: 2, CpuQuota: -1, CpuPeriod: 100000}}, cpuReq: "2m", cpuLim: "-", mem: "-"},
		{name: "zeros", in: &runtimeapi.ContainerResources{Linux: &runtimeapi.LinuxContainerResources{}}, none: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := toContainerResources(tc.in)
			if tc.none {
				if got != nil {
					t.Fatalf("got %+v, want none", got)
				}
				return
			}
			if str(got.CPURequest) != tc.cpuReq || str(got.CPULimit) != tc.cpuLim || str(got.MemoryLimit) != tc.mem {
				t.Fatalf("got %s %s %s, want %s %s %s", str(got.CPURequest), str(got.CPULimit), str(got.MemoryLimit), tc.cpuReq, tc.cpuLim, tc.mem)
			}
		})
	}
}

// Every request the agent writes as shares reads back as itself, so a status does not show a
// resize that never happened.
func TestSharesRoundTrip(t *testing.T) {
	m := NewManager(Deps{})
	for milli := int64(2); milli <= 4000; milli++ {
		c := &v1.Container{Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
			v1.ResourceCPU: *resource.NewMilliQuantity(milli, resource.DecimalSI)}}}
		shares := m.containerLinuxResources(&v1.Pod{}, c).CpuShares
		if got := sharesToMilliCPU(shares); got != milli {
			t.Fatalf("%dm -> %d shares -> %dm", milli, shares, got)
		}
	}
}

type fixedCPUs string

func (f fixedCPUs) CPUSet(*v1.Pod, string) string { return string(f) }
func (fixedCPUs) Created(string, string)          {}

// An in-place update carries the container's cpuset as its creation did, so a runtime that
// replaces rather than merges the figures does not widen a pinned container.
func TestResizeKeepsTheCPUSet(t *testing.T) {
	m := NewManager(Deps{CPUs: fixedCPUs("1")})
	if r := m.containerLinuxResources(&v1.Pod{}, &v1.Container{}); r.CpusetCpus != "1" {
		t.Fatalf("cpuset %q, want the CPU manager's 1", r.CpusetCpus)
	}
}
