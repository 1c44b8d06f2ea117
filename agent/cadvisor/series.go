package cadvisor

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/lazy"
)

// cAdvisor's label names, in the order labels.values gives them.
var base = []string{"container", "id", "image", "name", "namespace", "pod"}

func with(extra ...string) []string { return append(append([]string{}, base...), extra...) }

type descSet struct {
	cpuUsage, cpuUser, cpuSystem                  *prometheus.Desc
	cfsPeriods, cfsThrottledPeriods, cfsThrottled *prometheus.Desc
	memUsage, memWorkingSet, memRSS, memCache     *prometheus.Desc
	memMapped, memFailures, oomEvents             *prometheus.Desc
	specShares, specQuota, specPeriod, specMemory *prometheus.Desc
	specSwap                                      *prometheus.Desc
	threads, lastSeen                             *prometheus.Desc
	netRxBytes, netRxErrors, netTxBytes           *prometheus.Desc
	netTxErrors                                   *prometheus.Desc
	netRxPackets, netRxDropped, netTxPackets      *prometheus.Desc
	netTxDropped                                  *prometheus.Desc
	fsReadBytes, fsWriteBytes, fsReads, fsWrites  *prometheus.Desc
	processes, fds, sockets, startTime            *prometheus.Desc
	machineCores, machineMemory, scrapeError      *prometheus.Desc
}

var descs = lazy.Value[*descSet]{New: func() *descSet {
	n := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, labels, nil)
	}
	machine := []string{"boot_id", "machine_id", "system_uuid"}
	return &descSet{
		cpuUsage:            n("container_cpu_usage_seconds_total", "Cumulative cpu time consumed in seconds.", with("cpu")),
		cpuUser:             n("container_cpu_user_seconds_total", "Cumulative user cpu time consumed in seconds.", base),
		cpuSystem:           n("container_cpu_system_seconds_total", "Cumulative system cpu time consumed in seconds.", base),
		cfsPeriods:          n("container_cpu_cfs_periods_total", "Number of elapsed enforcement period intervals.", base),
		cfsThrottledPeriods: n("container_cpu_cfs_throttled_periods_total", "Number of throttled period intervals.", base),
		cfsThrottled:        n("container_cpu_cfs_throttled_seconds_total", "Total time duration the container has been throttled.", base),
		memUsage:            n("container_memory_usage_bytes", "Current memory usage in bytes, including all memory regardless of when it was accessed", base),
		memWorkingSet:       n("container_memory_working_set_bytes", "Current working set in bytes.", base),
		memRSS:              n("container_memory_rss", "Size of RSS in bytes.", base),
		memCache:            n("container_memory_cache", "Number of bytes of page cache memory.", base),
		memMapped:           n("container_memory_mapped_file", "Size of memory mapped files in bytes.", base),
		memFailures:         n("container_memory_failures_total", "Cumulative count of memory allocation failures.", with("failure_type", "scope")),
		oomEvents:           n("container_oom_events_total", "Count of out of memory events observed for the container", base),
		specShares:          n("container_spec_cpu_shares", "CPU share of the container.", base),
		specQuota:           n("container_spec_cpu_quota", "CPU quota of the container.", base),
		specPeriod:          n("container_spec_cpu_period", "CPU period of the container.", base),
		specMemory:          n("container_spec_memory_limit_bytes", "Memory limit for the container.", base),
		specSwap:            n("container_spec_memory_swap_limit_bytes", "Memory swap limit for the container.", base),
		threads:             n("container_threads", "Number of threads running inside the container", base),
		lastSeen:            n("container_last_seen", "Last time a container was seen by the exporter", base),
		netRxBytes:          n("container_network_receive_bytes_total", "Cumulative count of bytes received", with("interface")),
		netRxErrors:         n("container_network_receive_errors_total", "Cumulative count of errors encountered while receiving", with("interface")),
		netTxBytes:          n("container_network_transmit_bytes_total", "Cumulative count of bytes transmitted", with("interface")),
		netTxErrors:         n("container_network_transmit_errors_total", "Cumulative count of errors encountered while transmitting", with("interface")),
		netRxPackets:        n("container_network_receive_packets_total", "Cumulative count of packets received", with("interface")),
		netRxDropped:        n("container_network_receive_packets_dropped_total", "Cumulative count of packets dropped while receiving", with("interface")),
		netTxPackets:        n("container_network_transmit_packets_total", "Cumulative count of packets transmitted", with("interface")),
		netTxDropped:        n("container_network_transmit_packets_dropped_total", "Cumulative count of packets dropped while transmitting", with("interface")),
		fsReadBytes:         n("container_fs_reads_bytes_total", "Cumulative count of bytes read", with("device")),
		fsWriteBytes:        n("container_fs_writes_bytes_total", "Cumulative count of bytes written", with("device")),
		fsReads:             n("container_fs_reads_total", "Cumulative count of reads completed", with("device")),
		fsWrites:            n("container_fs_writes_total", "Cumulative count of writes completed", with("device")),
		processes:           n("container_processes", "Number of processes running inside the container.", base),
		fds:                 n("container_file_descriptors", "Number of open file descriptors for the container.", base),
		sockets:             n("container_sockets", "Number of open sockets for the container.", base),
		startTime:           n("container_start_time_seconds", "Start time of the container since unix epoch in seconds.", base),
		machineCores:        n("machine_cpu_cores", "Number of logical CPU cores.", machine),
		machineMemory:       n("machine_memory_bytes", "Amount of memory installed on the machine.", machine),
		scrapeError:         n("container_scrape_error", "1 if there was an error while getting container metrics, 0 otherwise", nil),
	}
}}

func allDescs() []*prometheus.Desc {
	d := descs.Get()
	return []*prometheus.Desc{d.cpuUsage, d.cpuUser, d.cpuSystem, d.cfsPeriods, d.cfsThrottledPeriods, d.cfsThrottled,
		d.memUsage, d.memWorkingSet, d.memRSS, d.memCache, d.memMapped, d.memFailures, d.oomEvents,
		d.specShares, d.specQuota, d.specPeriod, d.specMemory, d.specSwap, d.threads, d.lastSeen,
		d.netRxBytes, d.netRxErrors, d.netTxBytes, d.netTxErrors, d.netRxPackets, d.netRxDropped, d.netTxPackets, d.netTxDropped,
		d.fsReadBytes, d.fsWriteBytes, d.fsReads, d.fsWrites, d.processes, d.fds, d.sockets, d.startTime,
		d.machineCores, d.machineMemory, d.scrapeError}
}

const nanos = 1e9

// maxNetTries bounds the processes looked at for a pod's network namespace.
const maxNetTries = 16

// collectCgroup sends the series of one cgroup; a figure that cannot be read is left out, not
// reported as 0 (a cgroup removed while it was read gives only what was read before).
// The processes it reads are kept in pids by cgroup, for the network figures that follow.
func (c *Collector) collectCgroup(ch chan<- prometheus.Metric, g cgroup, now float64, devices *deviceNames, pids map[string][]int) {
	d := descs.Get()
	fs, p, lv := c.cfg.FS, g.id, g.values()
	counter := func(desc *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, v, append(append([]string{}, lv...), extra...)...)
	}
	gauge := func(desc *prometheus.Desc, v float64, extra ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, append(append([]string{}, lv...), extra...)...)
	}
	seen := false
	if ns, err := fs.CPUUsageNanos(p); err == nil {
		seen = true
		counter(d.cpuUsage, float64(ns)/nanos, "total")
	}
	if s, err := fs.CPUStat(p); err == nil {
		counter(d.cpuUser, float64(s.UserNanos)/nanos)
		counter(d.cpuSystem, float64(s.SystemNanos)/nanos)
		if s.Periods > 0 {
			counter(d.cfsPeriods, float64(s.Periods))
			counter(d.cfsThrottledPeriods, float64(s.ThrottledPeriods))
			counter(d.cfsThrottled, float64(s.ThrottledNanos)/nanos)
		}
	}
	if m, err := fs.Memory(p); err == nil {
		seen = true
		gauge(d.memUsage, float64(m.Usage))
		if m.HasStat {
			gauge(d.memWorkingSet, float64(m.WorkingSet()))
			gauge(d.memRSS, float64(m.RSS))
			gauge(d.memCache, float64(m.Cache))
			gauge(d.memMapped, float64(m.MappedFile))
			// The faults read are the hierarchy's (v1's total_*); on v2 the cgroup's own are the
			// same counters, as cAdvisor reports them there.
			counter(d.memFailures, float64(m.PgFault), "pgfault", "hierarchy")
			counter(d.memFailures, float64(m.PgMajFault), "pgmajfault", "hierarchy")
			if fs.Unified() {
				counter(d.memFailures, float64(m.PgFault), "pgfault", "container")
				counter(d.memFailures, float64(m.PgMajFault), "pgmajfault", "container")
			}
		}
	}
	if n, err := fs.OOMKills(p); err == nil {
		counter(d.oomEvents, float64(n))
	}
	if lim, err := fs.Limits(p); err == nil {
		gauge(d.specShares, float64(lim.CPUShares))
		if lim.CPUQuota > 0 {
			gauge(d.specQuota, float64(lim.CPUQuota))
		}
		if lim.CPUPeriod > 0 {
			gauge(d.specPeriod, float64(lim.CPUPeriod))
		}
		gauge(d.specMemory, float64(max(lim.MemoryLimit, 0)))
		if lim.SwapLimit >= 0 {
			gauge(d.specSwap, float64(lim.SwapLimit))
		}
	}
	if n, err := fs.Pids(p); err == nil {
		gauge(d.threads, float64(n))
	}
	if io, err := fs.IO(p); err == nil {
		for _, s := range io {
			dev := devices.name(s.Major, s.Minor)
			if dev == "" {
				continue
			}
			counter(d.fsReadBytes, float64(s.ReadBytes), dev)
			counter(d.fsWriteBytes, float64(s.WriteBytes), dev)
			counter(d.fsReads, float64(s.Reads), dev)
			counter(d.fsWrites, float64(s.Writes), dev)
		}
	}
	if seen {
		pids[p] = c.procsBelow(p, 0)
		c.collectProcesses(ch, lv, pids[p])
		if t, ok := c.startTime(g); ok {
			gauge(d.startTime, t)
		}
		gauge(d.lastSeen, now)
	}
}

// collectNetwork gives each ready pod's network figures (from the runtime: the pod's network
// namespace is the sandbox's) on the pod's sandbox, as cAdvisor gives them on the pause
// container's cgroup: container "", the sandbox's ID as name.
func (c *Collector) collectNetwork(ctx context.Context, ch chan<- prometheus.Metric, k known, groups []cgroup, pids map[string][]int) {
	d := descs.Get()
	resp, err := c.cfg.Runtime.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{})
	if err != nil {
		return // figures the runtime does not give are left out
	}
	podPath := map[string]string{}     // sandbox ID → pod cgroup
	sandboxPath := map[string]string{} // sandbox ID → its own cgroup, where the runtime made one
	for _, g := range groups {
		if g.sandbox != "" {
			podPath[g.sandbox] = g.id
		}
		if g.container == "" && g.name != "" {
			sandboxPath[g.name] = g.id
		}
	}
	for _, s := range resp.GetStats() {
		id := s.GetAttributes().GetId()
		sb, ok := k.sandboxes[id]
		if !ok || sb.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		cg := podPath[id]
		if cg == "" {
			continue
		}
		// On the sandbox's cgroup where the runtime made one (containerd's pause), else on the
		// pod's (nodelet's runtime keeps the pod's init there).
		if p, ok := sandboxPath[id]; ok {
			cg = p
		}
		l := labels{id: cg, name: id, namespace: sb.GetMetadata().GetNamespace(), pod: sb.GetMetadata().GetName()}
		net := s.GetLinux().GetNetwork()
		ifaces := net.GetInterfaces()
		if len(ifaces) == 0 && net.GetDefaultInterface() != nil {
			ifaces = []*runtimeapi.NetworkInterfaceUsage{net.GetDefaultInterface()}
		}
		// Packets are not in CRI's figures: they come from the interfaces of the pod's network
		// namespace, seen by one of its processes, as cAdvisor reads them.
		var packets map[string]netCounters
		procs, ok := pids[cg]
		if !ok {
			procs = c.procsBelow(cg, 0)
		}
		for i, pid := range procs {
			// The runtime's own processes in the pod's cgroup (a monitor) live in the host's
			// namespace; the first of the pod's that does not is read.
			if packets = c.netDev(pid); packets != nil || i == maxNetTries {
				break
			}
		}
		for _, iface := range ifaces {
			lv := append(l.values(), iface.GetName())
			ch <- prometheus.MustNewConstMetric(d.netRxBytes, prometheus.CounterValue, float64(iface.GetRxBytes().GetValue()), lv...)
			ch <- prometheus.MustNewConstMetric(d.netRxErrors, prometheus.CounterValue, float64(iface.GetRxErrors().GetValue()), lv...)
			ch <- prometheus.MustNewConstMetric(d.netTxBytes, prometheus.CounterValue, float64(iface.GetTxBytes().GetValue()), lv...)
			ch <- prometheus.MustNewConstMetric(d.netTxErrors, prometheus.CounterValue, float64(iface.GetTxErrors().GetValue()), lv...)
			if p, ok := packets[iface.GetName()]; ok {
				ch <- prometheus.MustNewConstMetric(d.netRxPackets, prometheus.CounterValue, float64(p.rxPackets), lv...)
				ch <- prometheus.MustNewConstMetric(d.netRxDropped, prometheus.CounterValue, float64(p.rxDropped), lv...)
				ch <- prometheus.MustNewConstMetric(d.netTxPackets, prometheus.CounterValue, float64(p.txPackets), lv...)
				ch <- prometheus.MustNewConstMetric(d.netTxDropped, prometheus.CounterValue, float64(p.txDropped), lv...)
			}
		}
	}
}
