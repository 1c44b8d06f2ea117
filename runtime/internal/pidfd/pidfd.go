// Package pidfd signals and waits for processes the runtime started but is not the parent of
// (a pod's init after a restart, a container's conmon), through pidfds: once a pidfd is open and
// the process checked to be the one meant, nothing sent through it can reach a process that
// later reuses the PID, and its exit wakes a poll.
package pidfd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// Process is an open pidfd of a process found to be the one meant.
type Process struct{ fd int }

// Open opens a pidfd for pid and keeps it only if is(pid) holds once it is open: a PID reused
// before the open fails the check, and a process that exits after it leaves the pidfd reporting
// its exit. nil, nil: the process is gone or is not the one meant.
func Open(pid int, is func(pid int) bool) (*Process, error) {
	if pid <= 0 {
		return nil, nil
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pidfd of %d: %w", pid, err)
	}
	if !is(pid) {
		unix.Close(fd)
		return nil, nil
	}
	return &Process{fd: fd}, nil
}

// Close releases the pidfd.
func (p *Process) Close() { unix.Close(p.fd) }

// Kill sends SIGKILL; a process already gone is not an error.
func (p *Process) Kill() error {
	if err := unix.PidfdSendSignal(p.fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return err
	}
	return nil
}

// Wait waits up to d, and no longer than ctx, for the process to exit; exited says whether it did.
func (p *Process) Wait(ctx context.Context, d time.Duration) (exited bool, err error) {
	end := time.Now().Add(d)
	if dl, ok := ctx.Deadline(); ok && dl.Before(end) {
		end = dl
	}
	fds := []unix.PollFd{{Fd: int32(p.fd), Events: unix.POLLIN}}
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		left := time.Until(end)
		if left <= 0 {
			return false, nil
		}
		// Woken by the exit itself; at least every 100 ms to notice a cancelled ctx.
		ms := int(min(left, 100*time.Millisecond) / time.Millisecond)
		n, err := unix.Poll(fds, max(ms, 1))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false, err
		}
		if n > 0 {
			return true, nil
		}
	}
}
