package oci

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// SignalInit sends sig to a container's init without forking the runtime (`runc kill` costs a
// few milliseconds of Go start-up and state loading). It only does so when it can prove the pid
// is that init: the pidfd pins one process, and that process is a child of the container's
// conmon (a subreaper, which also holds the pid as a zombie until it reaps it, so the pid cannot
// be reused while conmon lives). false means "not proven": ask the runtime instead. Runtimes whose
// init is not a host process (gVisor) must not use this.
func SignalInit(pid, conmonPid int, sig syscall.Signal) bool {
	if pid <= 0 || conmonPid <= 0 {
		return false
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	if parentPid(pid) != conmonPid {
		return false
	}
	return unix.PidfdSendSignal(fd, sig, nil, 0) == nil
}

// parentPid reads PPid from /proc/<pid>/status; 0 when unknown.
func parentPid(pid int) int {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// Sandboxed reports a runtime whose container processes are not host processes (gVisor).
func (r *Runtime) Sandboxed() bool { return r.sandboxed() }
