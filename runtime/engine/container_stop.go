package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/oci"
	"github.com/nodelet/nodelet/runtime/store"
)

// killWait bounds the wait after SIGKILL: the kernel ends a killed process group in moments, so
// only a wedged process (in D state) or a dead monitor takes this long.
const killWait = 30 * time.Second

// StopContainer stops a container, giving it grace to exit after its stop signal. Stopping a
// stopped or unknown container succeeds.
func (s *Engine) StopContainer(ctx context.Context, id string, grace time.Duration) error {
	c, err := s.containers.Get(id)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil // CRI: stopping is idempotent, even when gone
	}
	if err != nil {
		return fmt.Errorf("container %q: %w", id, err)
	}
	return s.ctr.stopContainer(ctx, c, grace)
}

// stopContainer sends the stop signal, waits up to grace for the exit, then kills every process
// of the container. Stopping a stopped container succeeds.
func (m *containerManager) stopContainer(ctx context.Context, c *store.Container, grace time.Duration) error {
	if c.Snapshot().State == runtimeapi.ContainerState_CONTAINER_EXITED {
		return nil
	}
	if m.handleExit(c.ID) {
		return nil
	}
	rt, err := m.runtimeFor(c.Handler)
	if err != nil {
		return err
	}
	if grace > 0 && c.Snapshot().State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		sig, err := parseSignal(c.StopSignal)
		if err != nil {
			m.log.Warn("bad stop signal, using SIGTERM", "id", c.ID, "signal", c.StopSignal, "err", err)
			sig = unix.SIGTERM
		}
		if st := c.Snapshot(); rt.Sandboxed() || !oci.SignalInit(st.Pid, st.ConmonPid, sig) {
			if err := rt.Kill(ctx, c.ID, sig, false); err != nil {
				m.log.Debug("stop signal", "id", c.ID, "err", err) // it may have just exited
			}
		}
		if m.waitExit(ctx, c, grace) {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if c.Snapshot().State == runtimeapi.ContainerState_CONTAINER_CREATED {
		// Never started: its init waits for `start` and some runtimes (runsc) ignore a kill
		// then. A forced delete ends it everywhere; conmon still sees the exit.
		if err := rt.Delete(ctx, c.ID); err != nil {
			m.log.Debug("delete of a created container", "id", c.ID, "err", err)
		}
		m.openStartGate(rt, c)
	} else if !killOwnPIDNamespace(rt, c) {
		if err := rt.Kill(ctx, c.ID, unix.SIGKILL, true); err != nil {
			m.log.Debug("kill", "id", c.ID, "err", err)
		}
	}
	if !m.waitExit(ctx, c, killWait) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("container %s did not exit after SIGKILL: %w", c.ID, errdefs.ErrUnavailable)
	}
	return nil
}

// killOwnPIDNamespace SIGKILLs the init of a container that has a PID namespace of its own: the
// kernel then kills every process in that namespace, which is all of the container (exec'd
// processes join it too), without forking the runtime for `kill --all`. A container that may
// call setns (privileged, or given CAP_SYS_ADMIN) could have children in another PID namespace:
// for those the runtime kills by cgroup as before. false: not done.
func killOwnPIDNamespace(rt *oci.Runtime, c *store.Container) bool {
	sc := c.Config.GetLinux().GetSecurityContext()
	if rt.Sandboxed() || sc.GetNamespaceOptions().GetPid() != runtimeapi.NamespaceMode_CONTAINER || sc.GetPrivileged() {
		return false
	}
	for _, capName := range sc.GetCapabilities().GetAddCapabilities() {
		if n := strings.TrimPrefix(strings.ToUpper(capName), "CAP_"); n == "SYS_ADMIN" || n == "ALL" {
			return false
		}
	}
	st := c.Snapshot()
	return oci.SignalInit(st.Pid, st.ConmonPid, unix.SIGKILL)
}

// parseSignal reads an image's or request's stop signal: "SIGQUIT", "QUIT" or "3".
func parseSignal(v string) (syscall.Signal, error) {
	if v == "" {
		return unix.SIGTERM, nil
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n <= 0 || n > 64 {
			return 0, fmt.Errorf("signal %d out of range", n)
		}
		return syscall.Signal(n), nil
	}
	name := strings.ToUpper(v)
	if !strings.HasPrefix(name, "SIG") {
		name = "SIG" + name
	}
	if sig := unix.SignalNum(name); sig != 0 {
		return sig, nil
	}
	return 0, errors.New("unknown signal " + v)
}

// stopContainersOf kills every container of a sandbox (StopPodSandbox: the kubelet has
// already given them their grace period through StopContainer).
// They are killed together: each kill waits for its exit, and a pod's containers need not wait
// for one another.
func (m *containerManager) stopContainersOf(ctx context.Context, sandboxID string) error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for _, c := range m.containers.List() {
		if c.SandboxID != sandboxID {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.stopContainer(ctx, c, 0); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("stop container %s: %w", c.ID, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
