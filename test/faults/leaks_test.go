package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

// holdings is what a daemon and its pods hold on the host at one moment. Once every pod is
// removed it must be what it was before the first one was made.
type holdings struct {
	Mounts  []string // mount points under the daemon's dirs (rootfs overlays, pinned netns, shm)
	Paths   []string // files and dirs under --root and --state
	IPs     []string // host-local allocations of the daemon's network
	Veths   []string // ports of the daemon's bridge
	Cgroups []string // cgroups below the daemon's cgroup parent
	Procs   []string // conmons, runcs and container processes of the daemon
	FDs     int      // open fds of the daemon
	Threads int      // OS threads of the daemon
	RSS     int64    // resident memory of the daemon, bytes
}

// holdings measures what d holds now.
func (d *daemon) holdings() holdings {
	h := holdings{Mounts: testutil.MountsUnder(d.base)}
	for _, dir := range []string{d.root, d.state} {
		filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if p == d.sock {
				return nil
			}
			h.Paths = append(h.Paths, p)
			return nil
		})
	}
	ips, _ := os.ReadDir(filepath.Join(d.ipamDir, d.netName))
	for _, e := range ips {
		// host-local keeps its lock and the last address it gave out beside the allocations.
		if e.Name() != "lock" && !strings.HasPrefix(e.Name(), "last_reserved_ip") {
			h.IPs = append(h.IPs, e.Name())
		}
	}
	ports, _ := os.ReadDir(filepath.Join("/sys/class/net", d.bridge, "brif"))
	for _, e := range ports {
		h.Veths = append(h.Veths, e.Name())
	}
	for _, dir := range cgroupDirs(d.cgroup) {
		filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() && p != dir {
				h.Cgroups = append(h.Cgroups, p)
			}
			return nil
		})
	}
	self := ""
	if d.cmd != nil {
		self = strconv.Itoa(d.pid())
	}
	for _, p := range testutil.ProcessesMentioning(d.base) {
		if f := strings.Fields(p); len(f) > 0 && f[0] != self {
			h.Procs = append(h.Procs, p)
		}
	}
	for _, pid := range cgroupProcs(d.cgroup) {
		h.Procs = append(h.Procs, fmt.Sprintf("%d %s (in the pods' cgroups)", pid, cmdline(pid)))
	}
	if d.cmd != nil {
		h.FDs, h.Threads, h.RSS = processUsage(d.pid())
	}
	return h
}

// processUsage reads a process's open fds, threads and resident memory from /proc.
func processUsage(pid int) (fds, threads int, rss int64) {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	fds = len(ents)
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		switch k {
		case "Threads":
			threads, _ = strconv.Atoi(f[0])
		case "VmRSS":
			kb, _ := strconv.ParseInt(f[0], 10, 64)
			rss = kb << 10
		}
	}
	return fds, threads, rss
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// maxThreadGrowth bounds the daemon's threads above its baseline. Go keeps the threads that
// parallel blocking calls made, so the count need not return to baseline; a leak grows past any bound.
const maxThreadGrowth = 64

// leaksSince lists what now holds beyond base: every item that was not there, the fds above the
// baseline, threads above the bound.
func (now holdings) leaksSince(base holdings) []string {
	var out []string
	for _, s := range []struct {
		what      string
		base, now []string
	}{
		{"mounts", base.Mounts, now.Mounts},
		{"paths", base.Paths, now.Paths},
		{"CNI IPs", base.IPs, now.IPs},
		{"veths", base.Veths, now.Veths},
		{"cgroups", base.Cgroups, now.Cgroups},
		{"processes", base.Procs, now.Procs},
	} {
		if extra := topmost(added(s.base, s.now)); len(extra) > 0 {
			out = append(out, fmt.Sprintf("%s left behind (%d): %s", s.what, len(extra), strings.Join(extra[:min(len(extra), 20)], ", ")))
		}
	}
	if now.FDs > base.FDs {
		out = append(out, fmt.Sprintf("daemon fds %d, baseline %d", now.FDs, base.FDs))
	}
	if now.Threads > base.Threads+maxThreadGrowth {
		out = append(out, fmt.Sprintf("daemon threads %d, baseline %d (+%d allowed)", now.Threads, base.Threads, maxThreadGrowth))
	}
	return out
}

// added lists the items of now that base lacks.
func added(base, now []string) []string {
	var out []string
	for _, s := range now {
		if !slices.Contains(base, s) {
			out = append(out, s)
		}
	}
	return out
}

// topmost keeps the paths that are not below another listed one, so a leaked dir shows once.
func topmost(paths []string) []string {
	slices.Sort(paths)
	var out []string
	for _, p := range paths {
		if len(out) > 0 && strings.HasPrefix(p, out[len(out)-1]+"/") {
			continue
		}
		out = append(out, p)
	}
	return out
}

func (h holdings) String() string {
	return fmt.Sprintf("mounts=%d paths=%d ips=%d veths=%d cgroups=%d procs=%d fds=%d threads=%d rss=%.1fMiB",
		len(h.Mounts), len(h.Paths), len(h.IPs), len(h.Veths), len(h.Cgroups), len(h.Procs), h.FDs, h.Threads, float64(h.RSS)/(1<<20))
}

// waitNoLeaks polls until nothing is held beyond base (a conmon may take a moment to exit, a
// closed stream its fd) and returns what still is when the limit, a bound for a hang, is reached.
func (d *daemon) waitNoLeaks(base holdings) (holdings, []string) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		now := d.holdings()
		leaks := now.leaksSince(base)
		if len(leaks) == 0 || time.Now().After(deadline) {
			return now, leaks
		}
		time.Sleep(100 * time.Millisecond)
	}
}
