package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// MonitorExitGrace is how long WaitMonitorExit lets a container's conmon finish once its
// container has exited before killing it.
const MonitorExitGrace = 10 * time.Second

// WaitMonitorExit waits until the conmon of container id, PID pid, has exited. After its
// container exits, conmon still writes the exit file, flushes the log and closes its sockets in
// the bundle: removing the bundle under it races that, and a removal that returned while it ran
// would leave a process of a container the runtime no longer knows. A conmon still there after
// grace is killed. The wait is on a pidfd, so nothing is ever sent to a process that reused the
// PID; a PID that no longer names the container's conmon has nothing to wait for.
func WaitMonitorExit(ctx context.Context, pid int, id string, grace time.Duration) error {
	if pid <= 0 {
		return nil
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("conmon %d of %s: pidfd: %w", pid, id, err)
	}
	defer unix.Close(fd)
	// Checked after the pidfd is held: if the PID was reused before the open, the command line
	// read is the new process's and does not name the container.
	if !isMonitorOf(pid, id) {
		return nil
	}
	if exited, err := waitPidfd(ctx, fd, grace); exited || err != nil {
		return err
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("kill conmon %d of %s: %w", pid, id, err)
	}
	if exited, err := waitPidfd(ctx, fd, grace); err != nil || !exited {
		return fmt.Errorf("conmon %d of %s still there after SIGKILL: %w", pid, id, errors.Join(err, context.DeadlineExceeded))
	}
	return nil
}

// isMonitorOf reports whether the process pid is conmon for container id (its "-c <id>" argument).
func isMonitorOf(pid int, id string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.Contains(b, []byte("\x00-c\x00"+id+"\x00"))
}

// waitPidfd waits up to d (and no longer than ctx) for the process behind fd to exit.
func waitPidfd(ctx context.Context, fd int, d time.Duration) (exited bool, err error) {
	end := time.Now().Add(d)
	if dl, ok := ctx.Deadline(); ok && dl.Before(end) {
		end = dl
	}
	for {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		left := time.Until(end)
		if left <= 0 {
			return false, nil
		}
		// Wake at least every 100 ms to notice a cancelled ctx; the exit itself wakes the poll.
		ms := int(min(left, 100*time.Millisecond) / time.Millisecond)
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, max(ms, 1))
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
