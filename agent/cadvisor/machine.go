package cadvisor

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// collectMachine gives the machine's CPUs and memory, labelled as cAdvisor labels them.
func (c *Collector) collectMachine(ch chan<- prometheus.Metric) {
	d := descs.Get()
	ids := []string{
		firstLine(filepath.Join(c.cfg.ProcRoot, "sys/kernel/random/boot_id")),
		firstLine("/etc/machine-id"),
		firstLine("/sys/class/dmi/id/product_uuid"),
	}
	if n := cpuCount(filepath.Join(c.cfg.ProcRoot, "cpuinfo")); n > 0 {
		ch <- prometheus.MustNewConstMetric(d.machineCores, prometheus.GaugeValue, float64(n), ids...)
	}
	if total, ok := memTotal(filepath.Join(c.cfg.ProcRoot, "meminfo")); ok {
		ch <- prometheus.MustNewConstMetric(d.machineMemory, prometheus.GaugeValue, float64(total), ids...)
	}
}

// collectRoot gives the root cgroup's series (id "/"), the whole machine's as cAdvisor gives it.
func (c *Collector) collectRoot(ch chan<- prometheus.Metric, now float64) {
	d := descs.Get()
	lv := labels{id: "/"}.values()
	if m, err := c.cfg.FS.RootMemory(filepath.Join(c.cfg.ProcRoot, "meminfo")); err == nil {
		ch <- prometheus.MustNewConstMetric(d.memUsage, prometheus.GaugeValue, float64(m.Usage), lv...)
		ch <- prometheus.MustNewConstMetric(d.memWorkingSet, prometheus.GaugeValue, float64(m.WorkingSet()), lv...)
		ch <- prometheus.MustNewConstMetric(d.memRSS, prometheus.GaugeValue, float64(m.RSS), lv...)
		ch <- prometheus.MustNewConstMetric(d.memCache, prometheus.GaugeValue, float64(m.Cache), lv...)
		ch <- prometheus.MustNewConstMetric(d.lastSeen, prometheus.GaugeValue, now, lv...)
	}
	if ns, err := c.cfg.FS.CPUUsageNanos("/"); err == nil {
		ch <- prometheus.MustNewConstMetric(d.cpuUsage, prometheus.CounterValue, float64(ns)/nanos, append(lv, "total")...)
	}
}

// cpuCount counts the logical CPUs cpuinfo lists.
func cpuCount(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if k, _, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "processor" {
			n++
		}
	}
	return n
}

// memTotal is MemTotal, in bytes.
func memTotal(path string) (uint64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			return kb * 1024, err == nil
		}
	}
	return 0, false
}

func firstLine(path string) string {
	b, _ := os.ReadFile(path)
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line)
}
