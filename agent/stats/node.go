package stats

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/internal/cgroupfs"
)

// userHZ is the unit of /proc/stat's CPU columns; Linux fixes it at 100 for userspace.
const userHZ = 100

// cpuSample is the node's cumulative CPU time at one moment.
type cpuSample struct {
	at    time.Time
	usage uint64 // core-nanoseconds
}

// nodeCPU reads the node's busy CPU time from /proc/stat (every column but idle and iowait; guest
// time is already inside user and nice).
func nodeCPU(procRoot string) (usage uint64, boot time.Time, err error) {
	b, err := os.ReadFile(filepath.Join(procRoot, "stat"))
	if err != nil {
		return 0, boot, err
	}
	found := false
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "cpu":
			// user nice system idle iowait irq softirq steal guest guest_nice
			var ticks uint64
			for i, v := range f[1:] {
				if i == 3 || i == 4 || i >= 8 {
					continue
				}
				n, _ := strconv.ParseUint(v, 10, 64)
				ticks += n
			}
			usage = ticks * (uint64(time.Second) / userHZ)
			found = true
		case "btime":
			if len(f) > 1 {
				s, _ := strconv.ParseInt(f[1], 10, 64)
				boot = time.Unix(s, 0)
			}
		}
	}
	if !found {
		return 0, boot, fmt.Errorf("%s/stat: no cpu line", procRoot)
	}
	return usage, boot, nil
}

// nodeMemory is the machine's memory as the root cgroup counts it, with the machine's memory as
// its limit, as cAdvisor's root container gives the kubelet's summary: so the node's available
// memory is MemTotal less the working set, the same figure memory.available is measured by. Swap
// is read from /proc/meminfo. Either is nil when it cannot be read.
func nodeMemory(fs cgroupfs.FS, procRoot string, now metav1.Time) (*statsapi.MemoryStats, *statsapi.SwapStats) {
	var mem *statsapi.MemoryStats
	if m, err := fs.RootMemory(filepath.Join(procRoot, "meminfo")); err == nil {
		usage, ws, rss := m.Usage, m.WorkingSet(), m.RSS
		avail, _ := m.Available()
		mem = &statsapi.MemoryStats{Time: now, AvailableBytes: &avail, UsageBytes: &usage, WorkingSetBytes: &ws, RSSBytes: &rss}
	}
	return mem, nodeSwap(procRoot, now)
}

// nodeSwap reads the swap figures of /proc/meminfo.
func nodeSwap(procRoot string, now metav1.Time) *statsapi.SwapStats {
	f, err := os.Open(filepath.Join(procRoot, "meminfo"))
	if err != nil {
		return nil
	}
	defer f.Close()
	kv := map[string]uint64{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), ":")
		if !ok {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) == 0 {
			continue
		}
		n, _ := strconv.ParseUint(fs[0], 10, 64)
		if len(fs) > 1 && fs[1] == "kB" {
			n *= 1024
		}
		kv[k] = n
	}
	swapUsed := kv["SwapTotal"] - min(kv["SwapFree"], kv["SwapTotal"])
	swapFree := kv["SwapFree"]
	return &statsapi.SwapStats{Time: now, SwapUsageBytes: &swapUsed, SwapAvailableBytes: &swapFree}
}

// fsStats reports the filesystem holding path.
func fsStats(path string, now metav1.Time) *statsapi.FsStats {
	var st unix.Statfs_t
	if path == "" || unix.Statfs(path, &st) != nil {
		return nil
	}
	bs := uint64(st.Bsize)
	capacity, avail := st.Blocks*bs, st.Bavail*bs
	used := (st.Blocks - st.Bfree) * bs
	inodes, ifree := st.Files, st.Ffree
	iused := inodes - min(ifree, inodes)
	return &statsapi.FsStats{Time: now, CapacityBytes: &capacity, AvailableBytes: &avail, UsedBytes: &used,
		Inodes: &inodes, InodesFree: &ifree, InodesUsed: &iused}
}

// nodeNetwork reads /proc/net/dev of the host's network namespace, loopback left out.
func nodeNetwork(procRoot string, now metav1.Time) *statsapi.NetworkStats {
	b, err := os.ReadFile(filepath.Join(procRoot, "net", "dev"))
	if err != nil {
		return nil
	}
	ns := &statsapi.NetworkStats{Time: now}
	for _, line := range strings.Split(string(b), "\n")[2:] {
		name, rest, ok := strings.Cut(line, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "lo" {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 16 {
			continue
		}
		p := func(i int) *uint64 { n, _ := strconv.ParseUint(f[i], 10, 64); return &n }
		ns.Interfaces = append(ns.Interfaces, statsapi.InterfaceStats{
			Name: name, RxBytes: p(0), RxErrors: p(2), TxBytes: p(8), TxErrors: p(10),
		})
	}
	if len(ns.Interfaces) > 0 {
		ns.InterfaceStats = ns.Interfaces[0]
	}
	return ns
}

// nodeRlimit reports process counts against the pid limit.
func nodeRlimit(procRoot string, now metav1.Time) *statsapi.RlimitStats {
	r := &statsapi.RlimitStats{Time: now}
	if b, err := os.ReadFile(filepath.Join(procRoot, "sys", "kernel", "pid_max")); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil {
			r.MaxPID = &n
		}
	}
	// loadavg's fourth field is running/total scheduling entities (threads and processes).
	if b, err := os.ReadFile(filepath.Join(procRoot, "loadavg")); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 4 {
			if _, tot, ok := strings.Cut(f[3], "/"); ok {
				if n, err := strconv.ParseInt(tot, 10, 64); err == nil {
					r.NumOfRunningProcesses = &n
				}
			}
		}
	}
	return r
}
