package engine

// A sandbox's life, and what each step leaves on disk (every path follows from the ID, so a
// half-made or half-removed sandbox can always be finished off):
//
//	RunPodSandbox    validate → reserve name → record {Creating} → <root>/pods/<id>/{hostname,hosts,
//	                 resolv.conf} → cgroup dirs → pins <state>/ns/{net,ipc,uts}/<id> (sysctls applied
//	                 inside; catatonit started inside when the pod shares a PID namespace, pinned at
//	                 <state>/ns/pid/<id>) → tmpfs <state>/pods/<id>/shm → CNI ADD → record {READY}.
//	                 Any failure undoes the steps done, newest first.
//	StopPodSandbox   containers stopped → catatonit killed → CNI DEL (once per ADD) → shm unmounted →
//	                 record {NOTREADY}. Namespaces stay pinned (containers may still be inspected).
//	RemovePodSandbox containers removed → the Stop steps → pins, cgroups, dirs → record deleted →
//	                 name released.
//	restart          records loaded: a {Creating} one is a RunPodSandbox cut short and is undone;
//	                 a READY one whose pins or catatonit are gone becomes NOTREADY; pins with no
//	                 record are removed, and so are the dirs, shm mount, cgroups and network of
//	                 sandbox IDs no record names (sweep.go).
//
// CreateContainer holds the sandbox's lock shared (sandboxManager.rlock) and Stop and Remove hold it
// exclusively, so a container is never registered in a sandbox being stopped or removed.

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/nsmgr"
	"github.com/nodelet/nodelet/runtime/store"
)

// sandboxManager holds what the sandbox lifecycle needs beyond the registry. Owned by sandbox_*.go.
type sandboxManager struct {
	root, state  string // the daemon's --root and --state: each sandbox's dirs are under them
	catatonit    string
	cgroupParent string // the daemon's, for pods that name none
	log          *slog.Logger

	ns      *nsmgr.Manager
	cgroups *madeCgroups

	mu    sync.Mutex
	locks map[string]*sandboxLock
	// infraExited holds the reaper channel of each catatonit this daemon started, by sandbox ID.
	infraExited map[string]<-chan struct{}
}

type sandboxLock struct {
	mu   sync.RWMutex
	refs int
}

// lock serialises the changes to one sandbox (Stop, Remove, Update). It returns the
// unlock function.
func (m *sandboxManager) lock(id string) func() {
	return m.hold(id, false)
}

// rlock keeps the sandbox from changing while a container create adds to it: creates of one
// pod run side by side, and a Stop or Remove waits for them, then finds their containers.
func (m *sandboxManager) rlock(id string) func() {
	return m.hold(id, true)
}

func (m *sandboxManager) hold(id string, shared bool) func() {
	m.mu.Lock()
	l := m.locks[id]
	if l == nil {
		l = &sandboxLock{}
		m.locks[id] = l
	}
	l.refs++
	m.mu.Unlock()
	lock, unlock := l.mu.Lock, l.mu.Unlock
	if shared {
		lock, unlock = l.mu.RLock, l.mu.RUnlock
	}
	lock()
	return func() {
		unlock()
		m.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(m.locks, id)
		}
		m.mu.Unlock()
	}
}

func (m *sandboxManager) dir(id string) string      { return filepath.Join(m.root, "pods", id) }
func (m *sandboxManager) stateDir(id string) string { return filepath.Join(m.state, "pods", id) }

// saveSandbox persists sb and makes it the registry's snapshot.
func (s *Engine) saveSandbox(sb *store.Sandbox) error {
	if err := s.sandboxDB.Put(sb.ID, sb); err != nil {
		return fmt.Errorf("persist sandbox %s: %w", sb.ID, err)
	}
	s.sandboxes.Add(sb.ID, sb)
	return nil
}

// initSandboxManager sets up the sandbox manager; nothing of the host is looked at yet.
func (s *Engine) initSandboxManager() error {
	s.sb.root, s.sb.state = s.cfg.Root, s.cfg.State
	s.sb.catatonit, s.sb.cgroupParent, s.sb.log = s.cfg.CatatonitPath, s.cfg.CgroupParent, s.log
	s.sb.locks = map[string]*sandboxLock{}
	s.sb.infraExited = map[string]<-chan struct{}{}
	ns, err := nsmgr.New(filepath.Join(s.cfg.State, "ns"))
	if err != nil {
		return err
	}
	s.sb.ns = ns
	return nil
}

// recoverSandboxes rebuilds the sandbox registry from disk after a (re)start.
func (s *Engine) recoverSandboxes(ctx context.Context) error {
	for _, d := range []string{filepath.Join(s.cfg.Root, "pods"), filepath.Join(s.cfg.State, "pods")} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return err
		}
		if err := tightenPodDirs(d); err != nil {
			return err
		}
	}
	records, bad, err := s.sandboxDB.Load()
	if err != nil {
		return err
	}
	for name, err := range bad {
		s.log.Error("unreadable sandbox record, ignored", "file", name, "err", err)
	}
	// Private like the records: the ledger names pods' cgroups.
	ledgerDir := filepath.Join(s.cfg.Root, "cgroups")
	if err := os.MkdirAll(ledgerDir, 0o700); err != nil {
		return err
	}
	if s.sb.cgroups, err = openMadeCgroups(filepath.Join(ledgerDir, "made.json"), records); err != nil {
		return err
	}
	for id, sb := range records {
		if sb.ID != id {
			s.log.Error("sandbox record names another id, ignored", "file", id, "id", sb.ID)
			continue
		}
		if sb.Creating {
			s.log.Warn("undoing a sandbox whose RunPodSandbox was cut short", "id", id)
			if err := s.releaseSandbox(ctx, sb); err != nil {
				s.log.Error("undo half-made sandbox", "id", id, "err", err)
			}
			continue
		}
		if err := s.sandboxes.ReserveName(sb.Name, id); err != nil {
			s.log.Error("two sandbox records hold one name, ignoring the second", "id", id, "err", err)
			continue
		}
		if sb.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			if lost := lostNamespaces(sb); lost != "" {
				s.log.Warn("sandbox lost its namespaces while the daemon was down", "id", id, "lost", lost)
				sb = sb.Clone()
				sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
				if err := s.sandboxDB.Put(id, sb); err != nil {
					return err
				}
			}
		}
		s.sandboxes.Add(id, sb)
	}
	return s.sb.removeOrphanPins(records)
}

// lostNamespaces names what a ready sandbox no longer has (a reboot empties the state dir; a
// killed catatonit ends the PID namespace), or "" when all is in place.
func lostNamespaces(sb *store.Sandbox) string {
	for _, p := range []string{sb.NetNSPath, sb.IPCNSPath, sb.UTSNSPath, sb.PIDNSPath, sb.UserNSPath} {
		if p != "" && !nsmgr.IsPinned(p) {
			return p
		}
	}
	if sb.InfraPID != 0 && !infraAlive(sb.InfraPID, sb.InfraStartTime) {
		return fmt.Sprintf("pod init (pid %d)", sb.InfraPID)
	}
	return ""
}

// removeOrphanPins unpins namespaces no record owns, such as a Remove cut short after its record
// was deleted.
func (m *sandboxManager) removeOrphanPins(records map[string]*store.Sandbox) error {
	pins, err := m.ns.List()
	if err != nil {
		return err
	}
	for id := range pins {
		if sb, ok := records[id]; ok && !sb.Creating {
			continue
		}
		m.log.Warn("removing namespace pins no sandbox owns", "id", id)
		if err := m.ns.Remove(id); err != nil {
			m.log.Error("remove orphan pins", "id", id, "err", err)
		}
	}
	return nil
}
