package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/internal/pidfd"
)

// A pod that shares one PID namespace among its containers needs a process to hold it and to reap
// orphans in it: catatonit in pause mode, as pid 1 of a new PID namespace. The daemon starts it
// but does not own it: it must outlive a daemon crash, so it gets its own session and no
// death signal. It is known afterwards by pid plus start time, never by pid alone.

// startInfra starts `catatonit -P` in a new PID namespace, from the calling thread, whose other
// namespaces it inherits. The caller reaps it through the returned channel, closed when it exits.
func startInfra(catatonit string) (pid int, startTime uint64, exited <-chan struct{}, err error) {
	if catatonit == "" {
		return 0, 0, nil, errors.New("catatonit is not configured: a pod sharing its PID namespace needs it")
	}
	cmd := exec.Command(catatonit, "-P")
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID, Setsid: true}
	return runInfra(cmd)
}

func runInfra(cmd *exec.Cmd) (pid int, startTime uint64, exited <-chan struct{}, err error) {
	if err := cmd.Start(); err != nil {
		return 0, 0, nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	pid = cmd.Process.Pid
	startTime, err = procStartTime(pid)
	if err != nil {
		_ = cmd.Process.Kill()
		<-done
		return 0, 0, nil, err
	}
	return pid, startTime, done, nil
}

// startInfraUserns starts `catatonit -P` in new user, net, ipc, uts and PID namespaces, the user
// namespace mapped as u says (setgroups stays allowed: containers set their groups). It runs
// as the mapped root, so catatonit must be executable by others.
func startInfraUserns(catatonit string, u *runtimeapi.UserNamespace) (pid int, startTime uint64, exited <-chan struct{}, err error) {
	if catatonit == "" {
		return 0, 0, nil, errors.New("catatonit is not configured: a pod with its own user namespace needs it")
	}
	idmap := func(m []*runtimeapi.IDMapping) []syscall.SysProcIDMap {
		out := make([]syscall.SysProcIDMap, 0, len(m))
		for _, e := range m {
			out = append(out, syscall.SysProcIDMap{ContainerID: int(e.GetContainerId()), HostID: int(e.GetHostId()), Size: int(e.GetLength())})
		}
		return out
	}
	cmd := exec.Command(catatonit, "-P")
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNET | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWPID,
		Setsid:      true,
		UidMappings: idmap(u.GetUids()), GidMappings: idmap(u.GetGids()),
		GidMappingsEnableSetgroups: true,
	}
	return runInfra(cmd)
}

// procStartTime reads field 22 of /proc/<pid>/stat (after the command name, which may hold spaces
// and parentheses, hence the search for the last ')').
func procStartTime(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("pid %d: malformed stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return 0, fmt.Errorf("pid %d: malformed stat", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// infraAlive reports whether pid is still the pod init started at startTime: catatonit, or the
// process of a gVisor sandbox.
func infraAlive(pid int, startTime uint64) bool {
	if pid <= 0 {
		return false
	}
	st, err := procStartTime(pid)
	if err != nil || st != startTime {
		return false
	}
	// A zombie keeps its stat but is no longer holding anything.
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err == nil {
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && len(b) > i+2 && b[i+2] == 'Z' {
			return false
		}
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	return bytes.HasSuffix(argv0, []byte("catatonit")) || bytes.HasSuffix(argv0, []byte("runsc-sandbox"))
}

// killInfra kills the pod's init, if pid still is it, and waits until it has exited. exited is
// the reaper's channel when this daemon started it, else nil (after a restart init reaps it).
func killInfra(pid int, startTime uint64, exited <-chan struct{}) error {
	if pid <= 0 {
		return nil
	}
	p, err := pidfd.Open(pid, func(pid int) bool { return infraAlive(pid, startTime) })
	if err != nil || p == nil {
		return err
	}
	defer p.Close()
	if err := p.Kill(); err != nil {
		return fmt.Errorf("kill pod init %d: %w", pid, err)
	}
	// SIGKILL of a PID namespace's init cannot be ignored; the wait is bounded only in case the
	// kernel is stuck on uninterruptible I/O of a process in the namespace.
	if _, err := p.Wait(context.Background(), 30*time.Second); err != nil {
		return err
	}
	if exited != nil {
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
		}
	}
	return nil
}
