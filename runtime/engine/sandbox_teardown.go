package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/runtime/cni"
	"github.com/nodelet/nodelet/runtime/nsmgr"
	"github.com/nodelet/nodelet/runtime/store"
)

// Each step here is idempotent and works from the record alone, so Stop, Remove, a rolled-back
// Run and recovery after a crash all share them.

func podNetwork(sb *store.Sandbox) cni.PodNetwork {
	md := sb.Config.GetMetadata()
	return cni.PodNetwork{
		Namespace:    md.GetNamespace(),
		Name:         md.GetName(),
		UID:          md.GetUid(),
		SandboxID:    sb.ID,
		NetNSPath:    sb.NetNSPath,
		PortMappings: sb.Config.GetPortMappings(),
		Annotations:  sb.Config.GetAnnotations(),
		DNS:          sb.Config.GetDnsConfig(),
		CgroupParent: sb.CgroupParent,
	}
}

func hostNetwork(cfg *runtimeapi.PodSandboxConfig) bool {
	return cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE
}

// stopSandboxParts kills the pod's init, releases its network and unmounts its /dev/shm. It
// returns the changed record even on error, so that what did happen (a DEL done) is persisted.
func (s *Engine) stopSandboxParts(ctx context.Context, sb *store.Sandbox) (*store.Sandbox, error) {
	sb = sb.Clone()
	if sb.Gvisor {
		// runsc's delete ends the sandbox; killInit below is the backstop when runsc lost it.
		if err := s.deleteGvisorSandbox(ctx, sb); err != nil {
			return sb, err
		}
	}
	if err := s.sb.killInit(sb); err != nil {
		return sb, err
	}
	if sb.NetworkSetUp {
		if s.cfg.Network != nil {
			if err := s.cfg.Network.TearDownPod(ctx, podNetwork(sb)); err != nil {
				return sb, fmt.Errorf("tear down network of sandbox %s: %w", sb.ID, err)
			}
		}
		sb.NetworkSetUp, sb.NetworkReady = false, false
	}
	if err := unmount(filepath.Join(s.sb.stateDir(sb.ID), "shm")); err != nil {
		return sb, err
	}
	sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	return sb, nil
}

func (m *sandboxManager) killInit(sb *store.Sandbox) error {
	m.mu.Lock()
	exited := m.infraExited[sb.ID]
	m.mu.Unlock()
	if sb.InfraPID != 0 {
		if err := killInfra(sb.InfraPID, sb.InfraStartTime, exited); err != nil {
			return err
		}
	} else if sb.Creating {
		// A Run cut short after starting catatonit and before recording its pid. Its
		// namespaces were pinned before it started, and nothing but it can be in them yet.
		for _, k := range []nsmgr.Kind{nsmgr.PID, nsmgr.Net, nsmgr.IPC, nsmgr.UTS} {
			if pin := m.ns.Path(k, sb.ID); nsmgr.IsPinned(pin) {
				killProcessesIn(pin, k)
			}
		}
	}
	m.mu.Lock()
	delete(m.infraExited, sb.ID)
	m.mu.Unlock()
	return nil
}

// releaseSandbox removes everything of a sandbox but its containers (removed before), its record
// last so that a crash midway leaves a record to finish from.
func (s *Engine) releaseSandbox(ctx context.Context, sb *store.Sandbox) error {
	if sb.Creating && !hostNetwork(sb.Config) {
		// ADD may have run, or half-run, before the crash; DEL of what was never added is a
		// no-op for CNI plugins.
		sb = sb.Clone()
		sb.NetworkSetUp = true
		sb.NetNSPath = s.sb.ns.Path(nsmgr.Net, sb.ID)
	}
	sb, err := s.stopSandboxParts(ctx, sb)
	if err != nil {
		return err
	}
	var errs []error
	errs = append(errs, s.sb.ns.Remove(sb.ID))
	errs = append(errs, os.RemoveAll(s.sb.stateDir(sb.ID)))
	errs = append(errs, s.removeStrayContainerCgroups(sb.CgroupParent))
	errs = append(errs, removeCgroups(sb.CgroupCreated, sb.CgroupParent))
	errs = append(errs, s.sb.cgroups.release(sb.CgroupParent, s.sb.daemonCgroupParent()))
	errs = append(errs, os.RemoveAll(s.sb.dir(sb.ID)))
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("release sandbox %s: %w", sb.ID, err)
	}
	return s.sandboxDB.Delete(sb.ID)
}

// unmount detaches the mount at p; no mount there is not an error.
func unmount(p string) error {
	err := unix.Unmount(p, unix.MNT_DETACH)
	if err == nil || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil
	}
	return fmt.Errorf("unmount %s: %w", p, err)
}

// removeStrayContainerCgroups kills and removes the container cgroups (nodelet-<id>) below the pod
// cgroup whose container has no record: a create cut short by a crash can leave one, with its
// runtime's init process in it, and the pod cgroup then stays busy for good. Containers with a
// record, also of another sandbox sharing the pod cgroup (the kubelet's replacement sandbox), are
// left alone.
func (s *Engine) removeStrayContainerCgroups(pod string) error {
	roots, err := cgroupRoots()
	if err != nil {
		return err
	}
	known, err := s.containerDB.IDs()
	if err != nil {
		return err
	}
	var errs []error
	seen := map[string]bool{}
	for _, r := range roots {
		for _, child := range dirNames(filepath.Join(r.Path, pod), true) {
			id, ok := strings.CutPrefix(child, containerCgroupPrefix)
			if !ok || known[id] || seen[child] {
				continue
			}
			seen[child] = true
			s.log.Warn("removing the cgroup of a container no record knows", "cgroup", path.Join(pod, child))
			errs = append(errs, removeCgroupTree(roots, path.Join(pod, child)))
		}
	}
	return errors.Join(errs...)
}
