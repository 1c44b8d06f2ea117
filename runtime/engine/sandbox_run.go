package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/nsmgr"
	"github.com/nodelet/nodelet/runtime/store"
)

// shmSize is the pod's /dev/shm, the size Docker and the kubelet's users expect.
const shmSize = 64 << 20

// defaultCgroupParent is used when neither the pod nor the daemon's config names one.
const defaultCgroupParent = "/nodelet"

// sandboxName is the reserved name: one sandbox per pod attempt, as the kubelet expects.
func sandboxName(md *runtimeapi.PodSandboxMetadata) string {
	return fmt.Sprintf("%s_%s_%s_%d", md.Name, md.Namespace, md.Uid, md.Attempt)
}

// RunSandbox makes a pod sandbox from cfg on the named runtime handler ("" for the default) and
// returns its ID. As CreateContainer, it ends with the caller's context (or
// Config.CreateTimeout): whatever was made is undone, newest first, and the name released. cfg is
// validated here, by the code that turns it into names, paths and sysctls.
func (s *Engine) RunSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (_ string, retErr error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CreateTimeout)
	defer cancel()
	if err := validateSandboxConfig(cfg); err != nil {
		return "", err
	}
	nsOpts := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	r := &sandboxRun{
		s: s, ctx: ctx, cfg: cfg, askedHandler: handler,
		hostNet:   nsOpts.GetNetwork() == runtimeapi.NamespaceMode_NODE,
		hostIPC:   nsOpts.GetIpc() == runtimeapi.NamespaceMode_NODE,
		sharedPID: nsOpts.GetPid() == runtimeapi.NamespaceMode_POD,
	}
	defer func() {
		if retErr != nil {
			r.undo.run()
		}
	}()
	// Each step that makes something pushes its undo onto r.undo.
	if err := s.runSteps(ctx, "run sandbox", r.id, []step{
		{"resolveHandler", r.resolveHandler},
		{"checkUserns", r.checkUserns},
		{"plan", r.plan},
		{"reserveName", r.reserveName},
		{"recordCreating", r.recordCreating},
		{"makePodFiles", r.makePodFiles},
		{"makeCgroups", r.makeCgroups},
		{"makeNamespaces", r.makeNamespaces},
		{"mountShm", r.mountShm},
		{"setUpNetwork", r.setUpNetwork},
		{"startGvisor", r.startGvisor},
		{"recordReady", r.recordReady},
	}); err != nil {
		return "", err
	}
	return r.sb.ID, nil
}

// id is the sandbox's ID once plan has chosen it.
func (r *sandboxRun) id() string {
	if r.sb == nil {
		return ""
	}
	return r.sb.ID
}

// sandboxRun is one RunSandbox in progress: the record it builds (sb, whose fields say what
// has been made) and in undo how to take each step back.
type sandboxRun struct {
	s   *Engine
	ctx context.Context
	cfg *runtimeapi.PodSandboxConfig

	askedHandler                string // as the caller named it: "" is the default
	hostNet, hostIPC, sharedPID bool
	handler                     string
	daemonParent                string
	hostname                    string
	sb                          *store.Sandbox

	undo undoStack
}

func (r *sandboxRun) resolveHandler() (err error) {
	r.handler, err = r.s.ctr.resolveHandler(r.askedHandler)
	return err
}

// checkUserns refuses a pod in its own user namespace where that cannot work.
func (r *sandboxRun) checkUserns() error {
	u := r.cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions()
	if u == nil || u.GetMode() != runtimeapi.NamespaceMode_POD {
		return nil
	}
	if !usernsCapable(r.s.cfg.Handlers[r.handler]) {
		return invalid("runtime handler %q does not support user namespaces", r.handler)
	}
	if !r.s.usernsRootfsReachable() {
		return invalid("user namespaces are not supported here: the image store's rootfs dir is not searchable by others (a parent dir of the runtime's root is private), so a mapped root cannot reach its rootfs")
	}
	return nil
}

// plan builds the sandbox's record: its ID, dirs, hostname and the cgroups it will make. Nothing
// is made yet.
func (r *sandboxRun) plan() error {
	s, cfg := r.s, r.cfg
	id := store.NewID()
	sb := &store.Sandbox{
		ID:        id,
		Name:      sandboxName(cfg.Metadata),
		Config:    cfg,
		State:     runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
		CreatedAt: time.Now().UnixNano(),
		Handler:   r.handler,
		Dir:       s.sb.dir(id),
		Creating:  true,
		Gvisor:    s.gvisorHandler(r.handler),
	}
	r.sb = sb
	r.daemonParent = s.sb.daemonCgroupParent()
	sb.CgroupParent = cfg.GetLinux().GetCgroupParent()
	if sb.CgroupParent == "" {
		sb.CgroupParent = path.Join(r.daemonParent, id)
	}
	var err error
	if r.hostname, err = sandboxHostname(cfg, id, r.hostNet); err != nil {
		return err
	}
	if sb.CgroupCreated, err = missingCgroups(sb.CgroupParent, r.daemonParent); err != nil {
		return err
	}
	if r.sharedPID || sb.Gvisor {
		// The pod's init (catatonit, or the gVisor sandbox) lives in a cgroup of its own.
		sb.CgroupCreated = append(sb.CgroupCreated, path.Join(sb.CgroupParent, infraCgroup))
	}
	return nil
}

func (r *sandboxRun) reserveName() error {
	sb := r.sb
	if err := r.s.sandboxes.ReserveName(sb.Name, sb.ID); err != nil {
		return err
	}
	r.undo.push(func() { r.s.sandboxes.ReleaseName(sb.Name, sb.ID) })
	return nil
}

// recordCreating is written before anything is made, so that a crash from here on leaves a
// record that recovery undoes (see sandbox_state.go).
func (r *sandboxRun) recordCreating() error {
	id := r.sb.ID
	if err := r.s.sandboxDB.Put(id, r.sb); err != nil {
		return fmt.Errorf("persist sandbox %s: %w", id, err)
	}
	r.undo.push(func() { r.s.undo("delete record", r.s.sandboxDB.Delete(id)) })
	return nil
}

// makePodFiles writes the pod's hostname, hosts and resolv.conf into its dir.
func (r *sandboxRun) makePodFiles() error {
	sb := r.sb
	// Private: the pod's hosts and resolv.conf are its own business. The OCI runtime opens bind
	// sources from the host, so even a pod in its own user namespace needs no way in.
	if err := os.MkdirAll(sb.Dir, 0o700); err != nil {
		return err
	}
	r.undo.push(func() { r.s.undo("remove pod files", os.RemoveAll(sb.Dir)) })
	if err := writePodFiles(sb, r.hostname, r.hostNet); err != nil {
		return fmt.Errorf("pod files: %w", err)
	}
	return nil
}

func (r *sandboxRun) makeCgroups() error {
	sb := r.sb
	if err := r.s.sb.cgroups.create(sb.CgroupParent, r.daemonParent); err != nil {
		removeCgroups(sb.CgroupCreated, sb.CgroupParent)
		return err
	}
	r.undo.push(func() { r.s.undo("remove cgroup", removeCgroups(sb.CgroupCreated, sb.CgroupParent)) })
	return nil
}

func (r *sandboxRun) makeNamespaces() error {
	s, sb := r.s, r.sb
	// A gVisor pod's shared PID namespace is the Sentry's, not the host's.
	if err := s.sb.makeNamespaces(sb, r.hostname, !r.hostNet, !r.hostIPC, r.sharedPID && !sb.Gvisor); err != nil {
		return err
	}
	r.undo.push(func() {
		s.undo("kill pod init", s.sb.killInit(sb))
		s.undo("unpin namespaces", s.sb.ns.Remove(sb.ID))
	})
	return nil
}

// mountShm gives the pod its own /dev/shm unless it shares the host's IPC namespace.
func (r *sandboxRun) mountShm() error {
	if r.hostIPC {
		return nil
	}
	s, id := r.s, r.sb.ID
	shm := filepath.Join(s.sb.stateDir(id), "shm")
	r.undo.push(func() {
		s.undo("unmount shm", unmount(shm))
		s.undo("remove state dir", os.RemoveAll(s.sb.stateDir(id)))
	})
	if err := mountShm(shm); err != nil {
		return err
	}
	r.sb.ShmPath = shm
	return nil
}

// setUpNetwork has the network plugin ADD the pod, unless it uses the host's network or pods
// get loopback only.
func (r *sandboxRun) setUpNetwork() error {
	s, sb := r.s, r.sb
	if s.cfg.Network == nil || r.hostNet {
		return nil
	}
	sb.NetworkSetUp = true
	// DEL follows a failed ADD too: a plugin may have taken an address before failing.
	r.undo.push(func() {
		rctx, cancel := rollbackCtx(r.ctx)
		defer cancel()
		s.undo("tear down network", s.cfg.Network.TearDownPod(rctx, podNetwork(sb)))
	})
	res, err := s.cfg.Network.SetUpPod(r.ctx, podNetwork(sb))
	if err != nil {
		return fmt.Errorf("set up network of sandbox %s: %w", sb.ID, err)
	}
	if res != nil {
		sb.IPs = res.IPs
	}
	sb.NetworkReady = true
	return nil
}

func (r *sandboxRun) recordReady() error {
	r.sb.Creating = false
	r.sb.State = runtimeapi.PodSandboxState_SANDBOX_READY
	return r.s.saveSandbox(r.sb)
}

// makeNamespaces pins the pod's own namespaces and, when it shares one PID namespace, starts its
// init inside them, moves it into the pod cgroup and pins its PID namespace. On error, what it
// made is gone.
func (m *sandboxManager) makeNamespaces(sb *store.Sandbox, hostname string, ownNet, ownIPC, sharedPID bool) (retErr error) {
	var kinds []nsmgr.Kind
	if ownNet {
		// The UTS namespace follows the network's: CRI has no option of its own for it.
		kinds = append(kinds, nsmgr.Net, nsmgr.UTS)
	}
	if ownIPC {
		kinds = append(kinds, nsmgr.IPC)
	}
	if u := sb.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions(); u != nil && u.GetMode() == runtimeapi.NamespaceMode_POD {
		return m.makeUsernsNamespaces(sb, hostname, sharedPID, u)
	}
	var infraPID int
	var infraStart uint64
	var exited <-chan struct{}
	req := nsmgr.Request{ID: sb.ID, Kinds: kinds, Hostname: hostname, Sysctls: sb.Config.GetLinux().GetSysctls()}
	if sharedPID {
		req.Inside = func() (err error) {
			infraPID, infraStart, exited, err = startInfra(m.catatonit)
			return err
		}
	}
	paths, err := m.ns.Pin(req)
	if err != nil {
		if infraPID != 0 {
			_ = killInfra(infraPID, infraStart, exited)
		}
		if _, ok := errors.AsType[*nsmgr.SysctlError](err); ok {
			// The pod asked for a sysctl these namespaces do not have or accept.
			return fmt.Errorf("sandbox namespaces: %w (%w)", err, errdefs.ErrInvalidArgument)
		}
		return fmt.Errorf("sandbox namespaces: %w", err)
	}
	sb.NetNSPath, sb.UTSNSPath, sb.IPCNSPath = paths[nsmgr.Net], paths[nsmgr.UTS], paths[nsmgr.IPC]
	if !sharedPID {
		return nil
	}
	return m.adoptInfra(sb, infraPID, infraStart, exited)
}

// makeUsernsNamespaces makes the namespaces of a pod with its own user namespace. A thread of a
// multithreaded process cannot unshare a user namespace, so a helper process (catatonit) is born
// in new user, net, ipc, uts and PID namespaces, the kernel making the others owned by the user
// namespace, with the pod's mappings written by the parent before it runs. Its namespaces are
// pinned; it stays as the pod's init when the pod shares its PID namespace, else it is killed.
func (m *sandboxManager) makeUsernsNamespaces(sb *store.Sandbox, hostname string, sharedPID bool, u *runtimeapi.UserNamespace) error {
	infraPID, infraStart, exited, err := startInfraUserns(m.catatonit, u)
	if err != nil {
		return fmt.Errorf("sandbox namespaces: %w", err)
	}
	paths, err := m.ns.PinFrom(sb.ID, infraPID, []nsmgr.Kind{nsmgr.User, nsmgr.Net, nsmgr.UTS, nsmgr.IPC})
	if err == nil {
		if err = nsmgr.Setup(paths, hostname, sb.Config.GetLinux().GetSysctls()); err != nil {
			m.undo("unpin namespaces", m.ns.Remove(sb.ID))
		}
	}
	if err != nil {
		_ = killInfra(infraPID, infraStart, exited)
		if _, ok := errors.AsType[*nsmgr.SysctlError](err); ok {
			return fmt.Errorf("sandbox namespaces: %w (%w)", err, errdefs.ErrInvalidArgument)
		}
		return fmt.Errorf("sandbox namespaces: %w", err)
	}
	sb.NetNSPath, sb.UTSNSPath, sb.IPCNSPath, sb.UserNSPath = paths[nsmgr.Net], paths[nsmgr.UTS], paths[nsmgr.IPC], paths[nsmgr.User]
	if !sharedPID {
		if err := killInfra(infraPID, infraStart, exited); err != nil {
			m.undo("unpin namespaces", m.ns.Remove(sb.ID))
			return err
		}
		return nil
	}
	return m.adoptInfra(sb, infraPID, infraStart, exited)
}

// adoptInfra makes the started catatonit the pod's init: its reaper is recorded, it moves into
// the pod cgroup and its PID namespace is pinned. On error the init is killed and the pins gone.
func (m *sandboxManager) adoptInfra(sb *store.Sandbox, infraPID int, infraStart uint64, exited <-chan struct{}) (retErr error) {
	var err error
	m.mu.Lock()
	m.infraExited[sb.ID] = exited
	m.mu.Unlock()
	sb.InfraPID, sb.InfraStartTime = infraPID, infraStart
	defer func() {
		if retErr != nil {
			m.undo("kill pod init", m.killInit(sb))
			m.undo("unpin namespaces", m.ns.Remove(sb.ID))
		}
	}()
	if err := addToCgroup(sb.CgroupParent, infraPID); err != nil {
		return err
	}
	if sb.PIDNSPath, err = m.ns.PinPID(sb.ID, infraPID); err != nil {
		return err
	}
	return nil
}

// mountShm mounts the pod's /dev/shm. It is 1777 inside, as programs expect, so its dir on the
// host is private: other host users must not drop files into, nor read, a pod's shared memory.
func mountShm(p string) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	opts := fmt.Sprintf("mode=1777,size=%d", shmSize)
	if err := unix.Mount("shm", p, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return fmt.Errorf("mount pod shm: %w", err)
	}
	return nil
}

// undo logs the failure of a rollback step: the original error is what the caller must see.
func (s *Engine) undo(step string, err error) { logUndo(s.log, step, err) }

func (m *sandboxManager) undo(step string, err error) { logUndo(m.log, step, err) }

func logUndo(log *slog.Logger, step string, err error) {
	if err != nil {
		log.Error("rollback step failed", "step", step, "err", err)
	}
}
