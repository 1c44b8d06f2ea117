package oci

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// monitorLike starts a process whose command line carries "-c id" as conmon's does, as user uid
// when one is given; it runs until its stdin closes.
func monitorLike(t *testing.T, id string, uid ...uint32) (*exec.Cmd, func()) {
	t.Helper()
	cmd := exec.Command("sh", "-c", "read x; exit 0", "conmon", "-c", id)
	if len(uid) > 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid[0], Gid: uid[0]}}
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Until the child has exec'd, its command line is the test binary's. conmon's PID is read
	// from the pidfile it writes itself, so the runtime never sees that moment.
	for !namesContainer(cmd.Process.Pid, id) {
		runtime.Gosched()
	}
	return cmd, func() { in.Close() }
}

// The wait ends when the monitor leaves by itself, and nothing is sent to it.
func TestWaitMonitorExitWaitsForTheExit(t *testing.T) {
	cmd, finish := monitorLike(t, "ctr1")
	done := make(chan error, 1)
	go func() { done <- WaitMonitorExit(context.Background(), cmd.Process.Pid, "ctr1", time.Hour) }()
	finish()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("the monitor did not leave by itself: %v", err)
	}
}

// A monitor still there after the grace is killed.
func TestWaitMonitorExitKillsAfterGrace(t *testing.T) {
	cmd, _ := monitorLike(t, "ctr2")
	if err := WaitMonitorExit(context.Background(), cmd.Process.Pid, "ctr2", 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("monitor ended with %v, want SIGKILL", err)
	}
}

// A PID that names another process (the monitor gone, its PID reused) is left alone, as is a
// PID that is gone.
func TestWaitMonitorExitLeavesOtherProcesses(t *testing.T) {
	cmd, finish := monitorLike(t, "other")
	if err := WaitMonitorExit(context.Background(), cmd.Process.Pid, "ctr3", 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	finish()
	if err := cmd.Wait(); err != nil {
		t.Errorf("another container's monitor was touched: %v", err)
	}
	if err := WaitMonitorExit(context.Background(), cmd.Process.Pid, "other", time.Hour); err != nil {
		t.Errorf("gone: %v", err)
	}
}

// A process of another user whose command line names the container (a gone conmon's PID taken by
// a user who chose that command line) is neither waited for nor killed.
func TestWaitMonitorExitLeavesOtherUsers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root: run the tests as root (sudo go test ./runtime/oci/)")
	}
	cmd, finish := monitorLike(t, "ctr4", 65534)
	if err := WaitMonitorExit(context.Background(), cmd.Process.Pid, "ctr4", 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	finish()
	if err := cmd.Wait(); err != nil {
		t.Errorf("another user's process was touched: %v", err)
	}
}
