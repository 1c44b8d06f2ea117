package engine

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/runtime/internal/pidfd"
	"github.com/nodelet/nodelet/runtime/nsmgr"
)

// killAndWait SIGKILLs each of pids for which is still holds once its pidfd is open (a PID reused
// between the scan and the kill is never hit) and waits until they have all exited. The callers
// go on to unmount, delete and remove cgroups, which a dying process keeps busy, and a restarted
// daemon must report as gone only what is gone.
func killAndWait(pids []int, is func(pid int) bool) {
	self := os.Getpid()
	var killed []*pidfd.Process
	for _, pid := range pids {
		if pid <= 0 || pid == self {
			continue
		}
		p, err := pidfd.Open(pid, is)
		if err != nil || p == nil {
			continue
		}
		defer p.Close()
		if p.Kill() == nil {
			killed = append(killed, p)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), killWait)
	defer cancel()
	for _, p := range killed {
		_, _ = p.Wait(ctx, killWait)
	}
}

// procPIDs lists the PIDs under /proc.
func procPIDs() []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killProcessesIn kills every process whose namespace of kind is the one pinned at pin.
func killProcessesIn(pin string, kind nsmgr.Kind) {
	var want unix.Stat_t
	if unix.Stat(pin, &want) != nil {
		return
	}
	in := func(pid int) bool {
		var st unix.Stat_t
		return unix.Stat("/proc/"+strconv.Itoa(pid)+"/ns/"+string(kind), &st) == nil && st.Dev == want.Dev && st.Ino == want.Ino
	}
	killAndWait(slices.DeleteFunc(procPIDs(), func(pid int) bool { return !in(pid) }), in)
}

// killProcessesMentioning kills every process whose command line names p: an orphaned
// container's conmon and an OCI runtime call hung under it (both name the bundle). Container IDs
// are random, so nothing else names the bundle.
func killProcessesMentioning(p string) {
	mentions := func(pid int) bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		return err == nil && bytes.Contains(b, []byte(p))
	}
	killAndWait(slices.DeleteFunc(procPIDs(), func(pid int) bool { return !mentions(pid) }), mentions)
}

// killCgroupTree kills what runs in the cgroup dir and the cgroups below it.
func killCgroupTree(dir string) {
	listedIn := map[int]string{}
	var walk func(string)
	walk = func(dir string) {
		for _, child := range dirNames(dir, true) {
			walk(filepath.Join(dir, child))
		}
		for _, pid := range cgroupProcs(dir) {
			listedIn[pid] = dir
		}
	}
	walk(dir)
	// A PID read from cgroup.procs may be reused before its pidfd opens: the process must still
	// be listed where it was found.
	stillListed := func(pid int) bool { return slices.Contains(cgroupProcs(listedIn[pid]), pid) }
	killAndWait(slices.Collect(maps.Keys(listedIn)), stillListed)
}

func cgroupProcs(dir string) []int {
	b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
