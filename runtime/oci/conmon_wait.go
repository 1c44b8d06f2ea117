package oci

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nodelet/nodelet/runtime/internal/pidfd"
	"golang.org/x/sys/unix"
)

// MonitorExitGrace is how long WaitMonitorExit lets a container's conmon finish once its
// container has exited before killing it.
const MonitorExitGrace = 10 * time.Second

// WaitMonitorExit waits until the conmon of container id, PID pid, has exited. After its
// container exits, conmon still writes the exit file, flushes the log and closes its sockets in
// the bundle: removing the bundle under it races that, and a removal that returned while it ran
// would leave a process of a container the runtime no longer knows. A conmon still there after
// grace is killed. A PID that no longer names the container's conmon has nothing to wait for.
func WaitMonitorExit(ctx context.Context, pid int, id string, grace time.Duration) error {
	p, err := pidfd.Open(pid, func(pid int) bool { return isMonitorOf(pid, id) })
	if err != nil || p == nil {
		return err
	}
	defer p.Close()
	if exited, err := p.Wait(ctx, grace); exited || err != nil {
		return err
	}
	if err := p.Kill(); err != nil {
		return fmt.Errorf("kill conmon %d of %s: %w", pid, id, err)
	}
	if exited, err := p.Wait(ctx, grace); err != nil || !exited {
		return fmt.Errorf("conmon %d of %s still there after SIGKILL (%v)", pid, id, err)
	}
	return nil
}

// isMonitorOf reports whether the process pid is conmon for container id: its "-c <id>" argument,
// and run by the runtime's own user. A command line is anyone's to choose, so a process of another
// user that took a gone conmon's PID and named the container is not waited for or killed.
func isMonitorOf(pid int, id string) bool {
	var st unix.Stat_t
	if unix.Stat("/proc/"+strconv.Itoa(pid), &st) != nil || int(st.Uid) != os.Geteuid() {
		return false
	}
	return namesContainer(pid, id)
}

// namesContainer reports whether the command line of process pid carries "-c <id>".
func namesContainer(pid int, id string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.Contains(b, []byte("\x00-c\x00"+id+"\x00"))
}
