package stats

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/agent/internal/podpath"
)

func tsOr(ts int64, now metav1.Time) metav1.Time {
	if ts == 0 {
		return now
	}
	return metav1.NewTime(time.Unix(0, ts))
}

func u64(v *runtimeapi.UInt64Value) *uint64 {
	if v == nil {
		return nil
	}
	n := v.GetValue()
	return &n
}

func cpuStats(c *runtimeapi.CpuUsage, now metav1.Time) *statsapi.CPUStats {
	if c == nil {
		return nil
	}
	return &statsapi.CPUStats{Time: tsOr(c.GetTimestamp(), now),
		UsageNanoCores: u64(c.GetUsageNanoCores()), UsageCoreNanoSeconds: u64(c.GetUsageCoreNanoSeconds())}
}

func memStats(m *runtimeapi.MemoryUsage, now metav1.Time) *statsapi.MemoryStats {
	if m == nil {
		return nil
	}
	return &statsapi.MemoryStats{Time: tsOr(m.GetTimestamp(), now),
		AvailableBytes: u64(m.GetAvailableBytes()), UsageBytes: u64(m.GetUsageBytes()),
		WorkingSetBytes: u64(m.GetWorkingSetBytes()), RSSBytes: u64(m.GetRssBytes()),
		PageFaults: u64(m.GetPageFaults()), MajorPageFaults: u64(m.GetMajorPageFaults())}
}

func swapStats(s *runtimeapi.SwapUsage, now metav1.Time) *statsapi.SwapStats {
	if s == nil {
		return nil
	}
	return &statsapi.SwapStats{Time: tsOr(s.GetTimestamp(), now),
		SwapAvailableBytes: u64(s.GetSwapAvailableBytes()), SwapUsageBytes: u64(s.GetSwapUsageBytes())}
}

func netStats(n *runtimeapi.NetworkUsage, now metav1.Time) *statsapi.NetworkStats {
	if n == nil {
		return nil
	}
	iface := func(i *runtimeapi.NetworkInterfaceUsage) statsapi.InterfaceStats {
		return statsapi.InterfaceStats{Name: i.GetName(), RxBytes: u64(i.GetRxBytes()), RxErrors: u64(i.GetRxErrors()),
			TxBytes: u64(i.GetTxBytes()), TxErrors: u64(i.GetTxErrors())}
	}
	out := &statsapi.NetworkStats{Time: tsOr(n.GetTimestamp(), now)}
	if d := n.GetDefaultInterface(); d != nil {
		out.InterfaceStats = iface(d)
		out.Interfaces = append(out.Interfaces, out.InterfaceStats)
	}
	for _, i := range n.GetInterfaces() {
		if n.GetDefaultInterface() != nil && i.GetName() == n.GetDefaultInterface().GetName() {
			continue
		}
		out.Interfaces = append(out.Interfaces, iface(i))
	}
	return out
}

// containerStats converts a container's CRI stats; created is when the runtime made it (ns since
// the epoch, 0 when unknown), which the kubelet reports as its start time.
func containerStats(c *runtimeapi.ContainerStats, created int64, now metav1.Time) statsapi.ContainerStats {
	cs := statsapi.ContainerStats{
		Name:   c.GetAttributes().GetMetadata().GetName(),
		CPU:    cpuStats(c.GetCpu(), now),
		Memory: memStats(c.GetMemory(), now),
		Swap:   swapStats(c.GetSwap(), now),
	}
	if created > 0 {
		cs.StartTime = metav1.NewTime(time.Unix(0, created))
	}
	if wl := c.GetWritableLayer(); wl != nil {
		cs.Rootfs = &statsapi.FsStats{Time: tsOr(wl.GetTimestamp(), now), UsedBytes: u64(wl.GetUsedBytes()), InodesUsed: u64(wl.GetInodesUsed())}
	}
	return cs
}

func addU64(a, b *uint64) *uint64 {
	if a == nil {
		return b
	}
	if b == nil {
		return a
	}
	s := *a + *b
	return &s
}

func addCPU(a, b *statsapi.CPUStats) *statsapi.CPUStats {
	if b == nil {
		return a
	}
	if a == nil {
		c := *b
		return &c
	}
	return &statsapi.CPUStats{Time: b.Time, UsageNanoCores: addU64(a.UsageNanoCores, b.UsageNanoCores),
		UsageCoreNanoSeconds: addU64(a.UsageCoreNanoSeconds, b.UsageCoreNanoSeconds)}
}

func addMem(a, b *statsapi.MemoryStats) *statsapi.MemoryStats {
	if b == nil {
		return a
	}
	if a == nil {
		m := *b
		m.AvailableBytes = nil
		return &m
	}
	return &statsapi.MemoryStats{Time: b.Time, UsageBytes: addU64(a.UsageBytes, b.UsageBytes),
		WorkingSetBytes: addU64(a.WorkingSetBytes, b.WorkingSetBytes), RSSBytes: addU64(a.RSSBytes, b.RSSBytes)}
}

// addStorage fills the pod's ephemeral storage: its containers' writable layers plus its logs
// under LogDir/<namespace>_<name>_<uid>.
func (p *Provider) addStorage(ps *statsapi.PodStats, now metav1.Time) {
	var used uint64
	var inodes uint64
	for _, c := range ps.Containers {
		if c.Rootfs != nil && c.Rootfs.UsedBytes != nil {
			used += *c.Rootfs.UsedBytes
		}
		if c.Rootfs != nil && c.Rootfs.InodesUsed != nil {
			inodes += *c.Rootfs.InodesUsed
		}
	}
	// A pod whose names cannot be path elements has no log folder: nothing outside LogDir is walked.
	if dir, err := podpath.LogDir(p.opts.LogDir, ps.PodRef.Namespace, ps.PodRef.Name, types.UID(ps.PodRef.UID)); err == nil {
		for i := range ps.Containers {
			c := &ps.Containers[i]
			if cdir, err := podpath.ContainerLogDir(dir, c.Name); err == nil {
				b, n := du(cdir)
				c.Logs = &statsapi.FsStats{Time: now, UsedBytes: &b, InodesUsed: &n}
			}
		}
		logBytes, logInodes := du(dir)
		used += logBytes
		inodes += logInodes
	}
	ps.EphemeralStorage = &statsapi.FsStats{Time: now, UsedBytes: &used, InodesUsed: &inodes}
}

// addVolumes reports each volume the agent made for the pod under
// RootDir/pods/<uid>/volumes/<plugin>/<name>: its usage, and its filesystem's capacity; then
// its claimed volumes, as the volume manager measures them (a CSI volume's folder holds the
// driver's mount, which only the driver measures rightly).
func (p *Provider) addVolumes(ctx context.Context, ps *statsapi.PodStats, now metav1.Time) {
	if p.opts.Claims != nil {
		defer func() {
			ps.VolumeStats = append(ps.VolumeStats, p.opts.Claims.PodClaimStats(ctx, types.UID(ps.PodRef.UID))...)
		}()
	}
	volumes, err := podpath.VolumesDir(p.opts.RootDir, types.UID(ps.PodRef.UID))
	if err != nil {
		return
	}
	plugins, err := os.ReadDir(volumes)
	if err != nil {
		return
	}
	for _, plugin := range plugins {
		if plugin.Name() == "kubernetes.io~csi" {
			continue
		}
		dir := filepath.Join(volumes, plugin.Name())
		vols, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, v := range vols {
			path := filepath.Join(dir, v.Name())
			fsst := fsStats(path, now)
			if fsst == nil {
				continue
			}
			used, inodes := du(path)
			fsst.UsedBytes, fsst.InodesUsed = &used, &inodes
			ps.VolumeStats = append(ps.VolumeStats, statsapi.VolumeStats{Name: v.Name(), FsStats: *fsst})
			if ps.EphemeralStorage != nil && plugin.Name() == "kubernetes.io~empty-dir" {
				sum := *ps.EphemeralStorage.UsedBytes + used
				ps.EphemeralStorage.UsedBytes = &sum
			}
		}
	}
}

// du sums file sizes and counts inodes below path; entries it cannot read are skipped, so a
// volume being written to still gets a figure.
func du(path string) (bytes, inodes uint64) {
	filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		inodes++
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				bytes += uint64(fi.Size())
			}
		}
		return nil
	})
	return bytes, inodes
}
