package cadvisor

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// maxDepth bounds the walk below a cgroup: pods' cgroups hold containers' and, at most, the
// runtime's own below those.
const maxDepth = 3

// procsBelow are the processes of the cgroup p and the cgroups below it (cAdvisor counts a pod's
// processes with its containers').
func (c *Collector) procsBelow(p string, depth int) []int {
	pids, _ := c.cfg.FS.Procs(p)
	if depth == maxDepth {
		return pids
	}
	for _, child := range c.subdirs(p) {
		pids = append(pids, c.procsBelow(path.Join(p, child), depth+1)...)
	}
	return pids
}

// collectProcesses gives the processes, open file descriptors and sockets of the cgroup's
// processes, read from /proc as cAdvisor reads them (a process that exits meanwhile is skipped).
func (c *Collector) collectProcesses(ch chan<- prometheus.Metric, lv []string, pids []int) {
	d := descs.Get()
	fds, sockets := 0, 0
	for _, pid := range pids {
		dir := filepath.Join(c.cfg.ProcRoot, strconv.Itoa(pid), "fd")
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		fds += len(ents)
		for _, e := range ents {
			if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(target, "socket:") {
				sockets++
			}
		}
	}
	ch <- prometheus.MustNewConstMetric(d.processes, prometheus.GaugeValue, float64(len(pids)), lv...)
	ch <- prometheus.MustNewConstMetric(d.fds, prometheus.GaugeValue, float64(fds), lv...)
	ch <- prometheus.MustNewConstMetric(d.sockets, prometheus.GaugeValue, float64(sockets), lv...)
}

// startTime is when the container was created, as the runtime says, or, for a cgroup the
// runtime does not name, the oldest modification time of its folders, as cAdvisor takes it.
func (c *Collector) startTime(g cgroup) (float64, bool) {
	if g.created > 0 {
		return float64(g.created) / nanos, true
	}
	var oldest time.Time
	for _, ctrl := range []string{"cpu", "memory", "pids"} {
		fi, err := os.Stat(c.cfg.FS.Dir(ctrl, g.id))
		if err == nil && (oldest.IsZero() || fi.ModTime().Before(oldest)) {
			oldest = fi.ModTime()
		}
	}
	if oldest.IsZero() {
		return 0, false
	}
	return float64(oldest.UnixNano()) / nanos, true
}

// deviceNames maps block devices to their /dev names through sysfs, once per scrape.
type deviceNames struct {
	sys   string
	names map[[2]uint64]string
}

func (n *deviceNames) name(major, minor uint64) string {
	k := [2]uint64{major, minor}
	if s, ok := n.names[k]; ok {
		return s
	}
	s := ""
	f, err := os.Open(filepath.Join(n.sys, "dev/block", fmt.Sprintf("%d:%d", major, minor), "uevent"))
	if err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "DEVNAME="); ok && v != "" && !strings.Contains(v, "..") {
				s = "/dev/" + v
			}
		}
		f.Close()
	}
	n.names[k] = s
	return s
}

// netCounters are an interface's packet figures, which CRI's network stats lack.
type netCounters struct{ rxPackets, rxDropped, txPackets, txDropped uint64 }

// netDev reads /proc/<pid>/net/dev: the interfaces of the process's network namespace. It is
// nil when the process is in the agent's own namespace, the host's (a hostNetwork pod has no
// interfaces of its own; the runtime's monitors live there too).
func (c *Collector) netDev(pid int) map[string]netCounters {
	own, err := os.Readlink(filepath.Join(c.cfg.ProcRoot, strconv.Itoa(pid), "ns/net"))
	if err != nil {
		return nil
	}
	if host, err := os.Readlink(filepath.Join(c.cfg.ProcRoot, "self/ns/net")); err != nil || host == own {
		return nil
	}
	f, err := os.Open(filepath.Join(c.cfg.ProcRoot, strconv.Itoa(pid), "net/dev"))
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]netCounters{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		// bytes packets errs drop fifo frame compressed multicast | bytes packets errs drop ...
		v := strings.Fields(rest)
		if len(v) < 12 {
			continue
		}
		n := func(i int) uint64 { x, _ := strconv.ParseUint(v[i], 10, 64); return x }
		out[strings.TrimSpace(name)] = netCounters{rxPackets: n(1), rxDropped: n(3), txPackets: n(9), txDropped: n(11)}
	}
	return out
}
