package engine

// A container's life, as the records and the OCI runtime see it:
//
//	CreateContainer: name reserved → rootfs prepared → bundle written → record persisted (CREATED,
//	                 Creating) → conmon runs `runtime create` → record gets the init PID, no longer
//	                 Creating. Any failure undoes the steps done, newest first; a record still
//	                 Creating after a crash is undone on restart (undoCutShortCreate), and what no
//	                 record names is swept (sweep.go).
//	StartContainer:  Starting set (keeps a concurrent Start out) → `runtime start` → RUNNING.
//	exit:            conmon writes <state>/exits/<id> with the exit code; the exit watcher (inotify)
//	                 marks the record EXITED with the code, the file's time and a reason (OOMKilled when
//	                 conmon or the cgroup saw the OOM killer) and wakes StopContainer.
//	StopContainer:   stop signal, grace period, SIGKILL to every process; idempotent.
//	RemoveContainer: Removing set → kill if alive → `runtime delete` → rootfs, bundle, exit file,
//	                 record and name released; idempotent.
//
// Recovery (recoverContainers) relies on: records written before conmon runs, conmon outliving the
// daemon, exit files outliving the daemon (they are on --state), and the runtime's own state.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/oci"
	"github.com/nodelet/nodelet/runtime/store"
)

// containerManager holds what the container lifecycle needs beyond the registry: the OCI runtimes
// by handler, exit watching (the exit watcher, the monitor check, who waits for an exit), CPU
// samples and the event stream.
type containerManager struct {
	exitDir string
	minOOM  int
	events  *broadcaster

	// Shared with Engine, which adds and removes containers; the manager records their exits.
	containers *store.Registry[*store.Container]
	db         *store.Dir[store.Container]
	log        *slog.Logger

	// The configured OCI runtimes; runtimeFor builds each on first use.
	handlers       map[string]Handler
	defaultHandler string
	handlersDir    string // their --root when a Handler names none

	mu       sync.Mutex
	exited   map[string]chan struct{} // closed once the container's exit is recorded
	cpu      map[string]cpuSample     // last CPU reading, for usage rates
	runtimes map[string]*oci.Runtime  // by handler name

	watcher *fsnotify.Watcher
	stop    chan struct{}
	once    sync.Once
}

// initContainerManager sets up the container manager; nothing of the host is looked at yet.
func (s *Engine) initContainerManager() error {
	m := &s.ctr
	m.containers, m.db, m.log = s.containers, s.containerDB, s.log
	m.exitDir = filepath.Join(s.cfg.State, "exits")
	m.handlers, m.defaultHandler = s.cfg.Handlers, s.cfg.DefaultHandler
	m.handlersDir = filepath.Join(s.cfg.State, "handlers")
	m.minOOM = oci.MinOOMScoreAdj()
	m.exited = map[string]chan struct{}{}
	m.cpu = map[string]cpuSample{}
	m.runtimes = map[string]*oci.Runtime{}
	m.stop = make(chan struct{})
	return os.MkdirAll(m.exitDir, 0o700)
}

// recoverContainers starts watching exits and rebuilds the container registry from disk and the
// OCI runtimes after a (re)start.
func (s *Engine) recoverContainers(ctx context.Context) error {
	m := &s.ctr
	m.events = newBroadcaster(s)
	// Watch before reading records, so an exit between the two is not missed.
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	if err := w.Add(m.exitDir); err != nil {
		w.Close()
		return err
	}
	m.watcher = w
	go m.watchExits()
	go m.watchMonitors()

	records, bad, err := s.containerDB.Load()
	if err != nil {
		return err
	}
	for name, err := range bad {
		s.log.Error("unreadable container record, ignored", "file", name, "err", err)
	}
	// Each reconciliation may ask the OCI runtime (a fork and exec); a few at a time keeps a
	// restart with many containers quick without starving the machine.
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for id, c := range records {
		if c.Creating {
			s.log.Warn("undoing a container whose CreateContainer was cut short", "id", id)
			if err := s.undoCutShortCreate(ctx, c); err != nil {
				s.log.Error("undo half-made container", "id", id, "err", err)
			}
			continue
		}
		if err := s.containers.ReserveName(c.Name, id); err != nil {
			s.log.Error("container record with a duplicate name, ignored", "id", id, "err", err)
			continue
		}
		s.containers.Add(id, c)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			m.recoverContainer(ctx, c)
		}()
	}
	wg.Wait()
	return nil
}

// undoCutShortCreate removes everything a CreateContainer cut short by a crash may have made,
// its record last so that a crash midway leaves a record to finish from.
func (s *Engine) undoCutShortCreate(ctx context.Context, c *store.Container) error {
	if err := s.removeOrphanContainer(ctx, c.ID); err != nil {
		return err
	}
	if s.cfg.Images != nil {
		if err := s.removeImageVolumes(ctx, c.ImageVolumes); err != nil {
			return err
		}
	}
	return s.containerDB.Delete(c.ID)
}

// recoverContainer reconciles one record with what happened while the daemon was away.
func (m *containerManager) recoverContainer(ctx context.Context, c *store.Container) {
	st := c.Snapshot()
	if st.State == runtimeapi.ContainerState_CONTAINER_EXITED {
		m.markClosed(c.ID) // waiters return at once
		return
	}
	if m.handleExit(c.ID) {
		return
	}
	rt, err := m.runtimeFor(c.Handler)
	if err != nil {
		// Its handler is no longer configured: the container may well still run, and calling it
		// exited would have the kubelet start a second copy. Leave it as recorded.
		m.log.Error("container's runtime handler is gone; its state cannot be checked", "id", c.ID, "handler", c.Handler, "err", err)
		return
	}
	rs, err := rt.State(ctx, c.ID)
	switch {
	case err == nil && rs.Status == "running":
		c.Lock()
		if c.Status.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			// The daemon died between `runtime start` and persisting RUNNING.
			c.Status.State = runtimeapi.ContainerState_CONTAINER_RUNNING
			c.Status.StartedAt = time.Now().UnixNano()
		}
		c.Status.Pid = rs.Pid
		_ = m.db.Put(c.ID, c)
		c.Unlock()
	case err == nil && (rs.Status == "created" || rs.Status == "creating"):
	default:
		if m.handleExit(c.ID) {
			return
		}
		msg := "the container ended while the runtime was not watching and its exit code was lost"
		if err != nil && !errors.Is(err, errdefs.ErrNotFound) {
			msg += ": " + err.Error()
		}
		m.markExited(c, 255, time.Now(), "Unknown", msg)
	}
}

// CloseContainers stops the container manager's background work (the exit watcher and event
// streams). Containers keep running. Engine.Close should call it.
func (s *Engine) CloseContainers() { s.ctr.close() }

func (m *containerManager) close() {
	m.once.Do(func() {
		if m.stop != nil {
			close(m.stop)
		}
		if m.watcher != nil {
			m.watcher.Close()
		}
		if m.events != nil {
			m.events.close()
		}
	})
}

// resolveHandler maps a RuntimeClass handler name to a configured OCI runtime.
func (m *containerManager) resolveHandler(name string) (string, error) {
	if name == "" {
		name = m.defaultHandler
	}
	if _, ok := m.handlers[name]; !ok {
		return "", invalid("runtime handler %q is not configured", name)
	}
	return name, nil
}

// runtimeFor builds the OCI runtime of a handler name ("" is the default handler).
func (m *containerManager) runtimeFor(handler string) (*oci.Runtime, error) {
	if handler == "" {
		handler = m.defaultHandler
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if rt, ok := m.runtimes[handler]; ok {
		return rt, nil
	}
	h, ok := m.handlers[handler]
	if !ok {
		return nil, fmt.Errorf("runtime handler %q is not configured: %w", handler, errdefs.ErrInvalidArgument)
	}
	var err error
	root := h.Root
	if root == "" {
		root = filepath.Join(m.handlersDir, handler)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, err
	}
	rt := &oci.Runtime{Path: h.Path, Root: root, Args: h.Args}
	if oci.NeedsHybridWrapper(h.Path) {
		if rt.CgroupPath, err = oci.HybridWrapper(m.handlersDir, h.Path); err != nil {
			return nil, err
		}
		rt.HideUnified = true
	}
	if rt.Sandboxed() {
		// conmon must wait for a gVisor subcontainer's exit through runsc (see oci/gvisor.go).
		if rt.MonitorPath, err = oci.GvisorWaitWrapper(m.handlersDir, h.Path); err != nil {
			return nil, err
		}
	}
	m.runtimes[handler] = rt
	return rt, nil
}
