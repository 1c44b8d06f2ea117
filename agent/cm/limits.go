package cm

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// The kernel's cpu.shares bounds and the kubelet's 1024 shares per CPU.
const (
	MinShares     = 2
	MaxShares     = 262144
	SharesPerCPU  = 1024
	milliCPUToCPU = 1000
)

// MilliCPUToShares converts a cpu amount to cgroup v1 cpu.shares as the kubelet does: zero is the
// minimum (not the kernel's 1024 default), and the result is clamped to what the kernel accepts.
func MilliCPUToShares(milliCPU int64) uint64 {
	if milliCPU == 0 {
		return MinShares
	}
	shares := milliCPU * SharesPerCPU / milliCPUToCPU
	switch {
	case shares < MinShares:
		return MinShares
	case shares > MaxShares:
		return MaxShares
	}
	return uint64(shares)
}

// QuotaPeriod is the CFS period the kubelet uses (100ms, in microseconds).
const QuotaPeriod = 100000

// minQuota is the kernel's smallest CFS quota (1ms).
const minQuota = 1000

// MilliCPUToQuota is the CFS quota of a cpu limit over period: 0 for no limit, at least 1ms.
func MilliCPUToQuota(milliCPU int64, period uint64) int64 {
	if milliCPU == 0 {
		return 0
	}
	return max(milliCPU*int64(period)/milliCPUToCPU, minQuota)
}

// SharesToWeight maps cgroup v1 shares [2, 262144] onto cgroup v2 cpu.weight [1, 10000], the
// conversion runc and the kubelet use, so both versions split the CPU alike.
func SharesToWeight(shares uint64) uint64 {
	if shares == 0 {
		return 0
	}
	return 1 + ((shares-2)*9999)/262142
}

// Limits are what is written on a cgroup; nil fields are left as they are.
type Limits struct {
	CPUShares *uint64
	// CPUQuota is microseconds of CPU per CPUPeriod; -1 is no limit.
	CPUQuota  *int64
	CPUPeriod *uint64
	Memory    *int64
	Pids      *int64
	// HugePages maps a page size in bytes to its limit in bytes.
	HugePages map[int64]int64
}

// LimitsFor turns a resource list into cgroup limits: cpu into shares, memory and pid as they are,
// hugepages-<size> per page size. compressibleOnly keeps only cpu (the *-compressible enforcement).
func LimitsFor(rl v1.ResourceList, compressibleOnly bool) Limits {
	var l Limits
	if q, ok := rl[v1.ResourceCPU]; ok {
		s := MilliCPUToShares(q.MilliValue())
		l.CPUShares = &s
	}
	if compressibleOnly {
		return l
	}
	if q, ok := rl[v1.ResourceMemory]; ok {
		m := q.Value()
		l.Memory = &m
	}
	if q, ok := rl[ResourcePID]; ok {
		p := q.Value()
		l.Pids = &p
	}
	for name, q := range rl {
		size, ok := hugePageSize(name)
		if !ok {
			continue
		}
		if l.HugePages == nil {
			l.HugePages = map[int64]int64{}
		}
		l.HugePages[size] = q.Value()
	}
	return l
}

// hugePageSize reads hugepages-<size> as a page size in bytes.
func hugePageSize(name v1.ResourceName) (int64, bool) {
	s, ok := strings.CutPrefix(string(name), v1.ResourceHugePagesPrefix)
	if !ok {
		return 0, false
	}
	q, err := parseQuantity(s)
	if err != nil || q <= 0 {
		return 0, false
	}
	return q, true
}

// pageSizeName is the kernel's spelling of a page size in hugetlb file names: 2MB, 1GB, 64KB.
func pageSizeName(bytes int64) string {
	units := []string{"B", "KB", "MB", "GB", "TB", "PB"}
	i := 0
	for bytes >= 1024 && bytes%1024 == 0 && i < len(units)-1 {
		bytes /= 1024
		i++
	}
	return fmt.Sprintf("%d%s", bytes, units[i])
}
