package server

import (
	"context"
	"errors"
	"fmt"
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

// resolveHandler maps a RuntimeClass handler name to a configured OCI runtime.
func (s *Server) resolveHandler(name string) (string, error) {
	if name == "" {
		name = s.cfg.DefaultHandler
	}
	if _, ok := s.cfg.Handlers[name]; !ok {
		return "", invalid("runtime handler %q is not configured", name)
	}
	return name, nil
}

// RunPodSandbox makes a pod sandbox. As CreateContainer, it ends with the client's call (or
// Config.CreateTimeout): whatever was made is undone, newest first, and the name released.
func (s *Server) RunPodSandbox(ctx context.Context, req *runtimeapi.RunPodSandboxRequest) (_ *runtimeapi.RunPodSandboxResponse, retErr error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CreateTimeout)
	defer cancel()
	cfg := req.GetConfig()
	if err := validateSandboxConfig(cfg); err != nil {
		return nil, err
	}
	handler, err := s.resolveHandler(req.GetRuntimeHandler())
	if err != nil {
		return nil, err
	}
	nsOpts := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if nsOpts.GetUsernsOptions() != nil && nsOpts.GetUsernsOptions().GetMode() == runtimeapi.NamespaceMode_POD {
		if !usernsCapable(s.cfg.Handlers[handler]) {
			return nil, invalid("runtime handler %q does not support user namespaces", handler)
		}
		if !s.usernsRootfsReachable() {
			return nil, invalid("user namespaces are not supported here: the image store's rootfs dir is not searchable by others (a parent dir of the runtime's root is private), so a mapped root cannot reach its rootfs")
		}
	}
	hostNet := nsOpts.GetNetwork() == runtimeapi.NamespaceMode_NODE
	hostIPC := nsOpts.GetIpc() == runtimeapi.NamespaceMode_NODE
	sharedPID := nsOpts.GetPid() == runtimeapi.NamespaceMode_POD

	id := store.NewID()
	sb := &store.Sandbox{
		ID:        id,
		Name:      sandboxName(cfg.Metadata),
		Config:    cfg,
		State:     runtimeapi.PodSandboxState_SANDBOX_NOTREADY,
		CreatedAt: time.Now().UnixNano(),
		Handler:   handler,
		Dir:       s.sandboxDir(id),
		Creating:  true,
	}
	daemonParent := s.daemonCgroupParent()
	sb.CgroupParent = cfg.GetLinux().GetCgroupParent()
	if sb.CgroupParent == "" {
		sb.CgroupParent = path.Join(daemonParent, id)
	}
	hostname, err := sandboxHostname(cfg, id, hostNet)
	if err != nil {
		return nil, err
	}
	if sb.CgroupCreated, err = missingCgroups(sb.CgroupParent, daemonParent); err != nil {
		return nil, err
	}
	if sharedPID {
		sb.CgroupCreated = append(sb.CgroupCreated, path.Join(sb.CgroupParent, infraCgroup))
	}

	if err := s.sandboxes.ReserveName(sb.Name, id); err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			s.sandboxes.ReleaseName(sb.Name, id)
		}
	}()

	// Written before anything is made, so that a crash from here on leaves a record that
	// recovery undoes (see sandbox_state.go).
	if err := s.sandboxDB.Put(id, sb); err != nil {
		return nil, fmt.Errorf("persist sandbox %s: %w", id, err)
	}
	defer func() {
		if retErr != nil {
			s.undo("delete record", s.sandboxDB.Delete(id))
		}
	}()

	// Private: the pod's hosts and resolv.conf are its own business. The OCI runtime opens bind
	// sources from the host, so even a pod in its own user namespace needs no way in.
	if err := os.MkdirAll(sb.Dir, 0o700); err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			s.undo("remove pod files", os.RemoveAll(sb.Dir))
		}
	}()
	if err := writePodFiles(sb, hostname, hostNet); err != nil {
		return nil, fmt.Errorf("pod files: %w", err)
	}

	if err := s.sb.cgroups.create(sb.CgroupParent, daemonParent); err != nil {
		removeCgroups(sb.CgroupCreated, sb.CgroupParent)
		return nil, err
	}
	defer func() {
		if retErr != nil {
			s.undo("remove cgroup", removeCgroups(sb.CgroupCreated, sb.CgroupParent))
		}
	}()

	if err := s.makeNamespaces(sb, hostname, !hostNet, !hostIPC, sharedPID); err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			s.undo("kill pod init", s.killSandboxInit(sb))
			s.undo("unpin namespaces", s.sb.ns.Remove(id))
		}
	}()

	if !hostIPC {
		shm := filepath.Join(s.sandboxStateDir(id), "shm")
		defer func() {
			if retErr != nil {
				s.undo("unmount shm", unmount(shm))
				s.undo("remove state dir", os.RemoveAll(s.sandboxStateDir(id)))
			}
		}()
		if err := mountShm(shm); err != nil {
			return nil, err
		}
		sb.ShmPath = shm
	}

	if s.cfg.Network != nil && !hostNet {
		sb.NetworkSetUp = true
		// DEL follows a failed ADD too: a plugin may have taken an address before failing.
		defer func() {
			if retErr != nil {
				rctx, cancel := rollbackCtx(ctx)
				defer cancel()
				s.undo("tear down network", s.cfg.Network.TearDownPod(rctx, podNetwork(sb)))
			}
		}()
		res, err := s.cfg.Network.SetUpPod(ctx, podNetwork(sb))
		if err != nil {
			return nil, fmt.Errorf("set up network of sandbox %s: %w", id, err)
		}
		if res != nil {
			sb.IPs = res.IPs
		}
		sb.NetworkReady = true
	}

	sb.Creating = false
	sb.State = runtimeapi.PodSandboxState_SANDBOX_READY
	if err := s.saveSandbox(sb); err != nil {
		return nil, err
	}
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

// makeNamespaces pins the pod's own namespaces and, when it shares one PID namespace, starts its
// init inside them, moves it into the pod cgroup and pins its PID namespace. On error, what it
// made is gone.
func (s *Server) makeNamespaces(sb *store.Sandbox, hostname string, ownNet, ownIPC, sharedPID bool) (retErr error) {
	var kinds []nsmgr.Kind
	if ownNet {
		// The UTS namespace follows the network's: CRI has no option of its own for it.
		kinds = append(kinds, nsmgr.Net, nsmgr.UTS)
	}
	if ownIPC {
		kinds = append(kinds, nsmgr.IPC)
	}
	if u := sb.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions(); u != nil && u.GetMode() == runtimeapi.NamespaceMode_POD {
		return s.makeUsernsNamespaces(sb, hostname, sharedPID, u)
	}
	var infraPID int
	var infraStart uint64
	var exited <-chan struct{}
	req := nsmgr.Request{ID: sb.ID, Kinds: kinds, Hostname: hostname, Sysctls: sb.Config.GetLinux().GetSysctls()}
	if sharedPID {
		req.Inside = func() (err error) {
			infraPID, infraStart, exited, err = startInfra(s.cfg.CatatonitPath)
			return err
		}
	}
	paths, err := s.sb.ns.Pin(req)
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
	return s.adoptInfra(sb, infraPID, infraStart, exited)
}

// makeUsernsNamespaces makes the namespaces of a pod with its own user namespace. A thread of a
// multithreaded process cannot unshare a user namespace, so a helper process (catatonit) is born
// in new user, net, ipc, uts and PID namespaces, the kernel making the others owned by the user
// namespace, with the pod's mappings written by the parent before it runs. Its namespaces are
// pinned; it stays as the pod's init when the pod shares its PID namespace, else it is killed.
func (s *Server) makeUsernsNamespaces(sb *store.Sandbox, hostname string, sharedPID bool, u *runtimeapi.UserNamespace) error {
	infraPID, infraStart, exited, err := startInfraUserns(s.cfg.CatatonitPath, u)
	if err != nil {
		return fmt.Errorf("sandbox namespaces: %w", err)
	}
	paths, err := s.sb.ns.PinFrom(sb.ID, infraPID, []nsmgr.Kind{nsmgr.User, nsmgr.Net, nsmgr.UTS, nsmgr.IPC})
	if err == nil {
		if err = nsmgr.Setup(paths, hostname, sb.Config.GetLinux().GetSysctls()); err != nil {
			s.undo("unpin namespaces", s.sb.ns.Remove(sb.ID))
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
			s.undo("unpin namespaces", s.sb.ns.Remove(sb.ID))
			return err
		}
		return nil
	}
	return s.adoptInfra(sb, infraPID, infraStart, exited)
}

// adoptInfra makes the started catatonit the pod's init: its reaper is recorded, it moves into
// the pod cgroup and its PID namespace is pinned. On error the init is killed and the pins gone.
func (s *Server) adoptInfra(sb *store.Sandbox, infraPID int, infraStart uint64, exited <-chan struct{}) (retErr error) {
	var err error
	s.sb.mu.Lock()
	s.sb.infraExited[sb.ID] = exited
	s.sb.mu.Unlock()
	sb.InfraPID, sb.InfraStartTime = infraPID, infraStart
	defer func() {
		if retErr != nil {
			s.undo("kill pod init", s.killSandboxInit(sb))
			s.undo("unpin namespaces", s.sb.ns.Remove(sb.ID))
		}
	}()
	if err := addToCgroup(sb.CgroupParent, infraPID); err != nil {
		return err
	}
	if sb.PIDNSPath, err = s.sb.ns.PinPID(sb.ID, infraPID); err != nil {
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
func (s *Server) undo(step string, err error) {
	if err != nil {
		s.log.Error("rollback step failed", "step", step, "err", err)
	}
}
