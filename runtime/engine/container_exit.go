package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/cgroupfs"
	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/oci"
	"github.com/nodelet/nodelet/runtime/store"
)

// Exits are learnt three ways: conmon's exit files (inotify on the exit dir, the normal way),
// polling by whoever waits for one (a lost event), and a periodic check of the monitors' pids (a
// conmon that died and will write nothing).

func (m *containerManager) watchExits() {
	for {
		select {
		case <-m.stop:
			return
		case ev, ok := <-m.watcher.Events:
			if !ok {
				return
			}
			if ev.Op&(fsnotify.Create|fsnotify.Write|fsnotify.Rename) != 0 {
				m.handleExit(filepath.Base(ev.Name))
			}
		case err, ok := <-m.watcher.Errors:
			if !ok {
				return
			}
			// An overflow loses events; every waiter also polls, so exits are still found.
			m.log.Warn("exit watcher", "err", err)
		}
	}
}

// monitorCheckInterval is how often running containers' monitors are checked for life. A conmon
// that died (killed by hand, or by the OOM killer) writes no exit file, so without this check its
// container's exit would go unnoticed until someone stopped it.
const monitorCheckInterval = 10 * time.Second

func (m *containerManager) watchMonitors() {
	t := time.NewTicker(monitorCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-m.stop:
			return
		case <-t.C:
		}
		for _, c := range m.containers.List() {
			st := c.Snapshot()
			if st.State != runtimeapi.ContainerState_CONTAINER_RUNNING || st.ConmonPid <= 0 || st.Removing {
				continue
			}
			// Signal 0 only asks whether the pid exists: no fork, no runtime call.
			if err := unix.Kill(st.ConmonPid, 0); !errors.Is(err, unix.ESRCH) {
				continue
			}
			if m.handleExit(c.ID) {
				continue
			}
			rt, err := m.runtimeFor(c.Handler)
			if err != nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			rs, err := rt.State(ctx, c.ID)
			cancel()
			if errors.Is(err, errdefs.ErrNotFound) || err == nil && rs.Status == "stopped" {
				m.markExited(c, 255, time.Now(), "Unknown", "the container's monitor died; its exit code was lost")
			}
		}
	}
}

// handleExit records a container's exit from its exit file; false when there is none (yet).
func (m *containerManager) handleExit(id string) bool {
	if store.ValidID(id) != nil {
		return false
	}
	code, at, ok := oci.ReadExitFile(filepath.Join(m.exitDir, id))
	if !ok {
		return false
	}
	c, err := m.containers.Get(id)
	if err != nil || c.ID != id {
		return false
	}
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	if oomKilled(c) {
		reason = "OOMKilled"
	}
	m.markExited(c, int32(code), at, reason, "")
	return true
}

func oomKilled(c *store.Container) bool {
	if _, err := os.Stat(filepath.Join(c.Bundle, oci.OOMFile)); err == nil {
		return true
	}
	n, err := cgroupfs.Host().OOMKills(c.CgroupPath)
	return err == nil && n > 0
}

// markExited moves a container to EXITED once; later calls change nothing.
func (m *containerManager) markExited(c *store.Container, code int32, at time.Time, reason, msg string) {
	c.Lock()
	if c.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		c.Unlock()
		m.markClosed(c.ID)
		return
	}
	c.Status.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.Status.ExitCode = code
	c.Status.FinishedAt = at.UnixNano()
	if c.Status.StartedAt > c.Status.FinishedAt {
		c.Status.StartedAt = c.Status.FinishedAt
	}
	c.Status.Reason, c.Status.Message = reason, msg
	if err := m.db.Put(c.ID, c); err != nil {
		m.log.Error("persist container exit", "id", c.ID, "err", err)
	}
	c.Unlock()
	m.markClosed(c.ID)
	m.events.publish(c.ID, c.SandboxID, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT)
}

func (m *containerManager) exitChan(id string) chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch, ok := m.exited[id]
	if !ok {
		ch = make(chan struct{})
		m.exited[id] = ch
	}
	return ch
}

func (m *containerManager) markClosed(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch, ok := m.exited[id]
	if !ok {
		ch = make(chan struct{})
		m.exited[id] = ch
	}
	select {
	case <-ch:
	default:
		close(ch)
	}
}

func (m *containerManager) forget(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.exited, id)
	delete(m.cpu, id)
}

// waitExit waits up to d for the container to exit. Besides the watcher's signal it polls the
// exit file and the runtime, so a lost inotify event or a dead conmon cannot hang a Stop.
func (m *containerManager) waitExit(ctx context.Context, c *store.Container, d time.Duration) bool {
	ch := m.exitChan(c.ID)
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	gone, ticks := 0, 0
	for {
		select {
		case <-ch:
			return true
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return false
		case <-tick.C:
			if m.handleExit(c.ID) {
				return true
			}
			// Asking the runtime costs a fork; once a second is enough for this fallback.
			if ticks++; ticks%10 != 0 {
				continue
			}
			if rt, err := m.runtimeFor(c.Handler); err == nil {
				if st, err := rt.State(ctx, c.ID); errors.Is(err, errdefs.ErrNotFound) || err == nil && st.Status == "stopped" {
					gone++
				} else {
					gone = 0
				}
			}
			// conmon writes the exit file right after reaping; a runtime that has said "stopped"
			// twice, a second apart, with no file means conmon is gone.
			if gone >= 2 {
				m.markExited(c, 137, time.Now(), "Error", "the container's monitor is gone; exit code unknown")
				return true
			}
		}
	}
}
