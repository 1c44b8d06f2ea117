package engine

import (
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/oci"
	"github.com/nodelet/nodelet/runtime/store"
)

// A pod of a gVisor handler (runsc) is one gVisor sandbox; oci/gvisor.go says how runsc is driven.
// On top of a runc pod's life (sandbox_state.go):
//
//	RunPodSandbox    … CNI ADD → the pod's root container (catatonit -P) created and started by
//	                 runsc in the pod's network namespace and in <pod cgroup>/pod-init, its sandbox
//	                 process recorded as the pod's init (pid and start time) → record {READY}.
//	                 No catatonit on the host: a shared PID namespace lives in the Sentry.
//	CreateContainer  the container is a subcontainer of the sandbox (annotations), its PID namespace
//	                 the pod's or its own by key; conmon runs runsc through the wait wrapper, whose
//	                 waiter is let go by StartContainer (or by Stop or Remove of a container never
//	                 started, or by recovery of a running one).
//	StopPodSandbox   containers stopped → `runsc delete --force` of the root container (the whole
//	                 sandbox goes, its cgroup with it) → CNI DEL …
//	restart          a READY pod whose sandbox process is gone becomes NOTREADY, as for catatonit.

// gvisorHandler reports whether pods of handler run in a gVisor sandbox.
func (s *Engine) gvisorHandler(handler string) bool {
	rt, err := s.ctr.runtimeFor(handler)
	return err == nil && rt.Sandboxed()
}

// gvisorBundle is the root container's bundle, in the pod's private dir.
func gvisorBundle(sb *store.Sandbox) string { return filepath.Join(sb.Dir, "gvisor") }

// gvisorSandboxCgroup holds the sandbox and its gofers, below the pod's cgroup.
func gvisorSandboxCgroup(sb *store.Sandbox) string { return path.Join(sb.CgroupParent, infraCgroup) }

// startGvisor starts the pod's sandbox. It runs after CNI ADD: runsc copies the interfaces,
// addresses and routes of the pod's network namespace into the Sentry when the sandbox boots.
func (r *sandboxRun) startGvisor() error {
	s, sb := r.s, r.sb
	if !sb.Gvisor {
		return nil
	}
	rt, err := s.ctr.runtimeFor(sb.Handler)
	if err != nil {
		return err
	}
	in := oci.GvisorInfra{
		ID: sb.ID, Bundle: gvisorBundle(sb), Catatonit: s.cfg.CatatonitPath,
		NetNSPath: sb.NetNSPath, Hostname: r.hostname, CgroupsPath: gvisorSandboxCgroup(sb),
		PIDKey: oci.GvisorPodPIDKey(sb.Dir), Network: gvisorNetwork(rt.Args, r.hostNet),
	}
	r.undo.push(func() {
		rctx, cancel := rollbackCtx(r.ctx)
		defer cancel()
		s.undo("delete gVisor sandbox", s.deleteGvisorSandbox(rctx, sb))
	})
	if err := oci.WriteGvisorInfra(in); err != nil {
		return err
	}
	pid, err := rt.StartGvisorSandbox(r.ctx, in)
	if err != nil {
		return err
	}
	start, err := procStartTime(pid)
	if err != nil {
		return err
	}
	sb.InfraPID, sb.InfraStartTime = pid, start
	return nil
}

// gvisorNetwork is runsc's --network for a pod: gVisor's own stack in the pod's namespace, or
// the host's for a host-network pod; "" when the handler's arguments choose themselves.
func gvisorNetwork(handlerArgs []string, hostNet bool) string {
	for _, a := range handlerArgs {
		if strings.HasPrefix(a, "--network") || strings.HasPrefix(a, "-network") {
			return ""
		}
	}
	if hostNet {
		return "host"
	}
	return "sandbox"
}

// deleteGvisorSandbox ends the pod's sandbox and every container in it, and forgets it in runsc
// (which removes the sandbox's cgroup). Deleting a sandbox already gone succeeds.
func (s *Engine) deleteGvisorSandbox(ctx context.Context, sb *store.Sandbox) error {
	rt, err := s.ctr.runtimeFor(sb.Handler)
	if err != nil {
		return err
	}
	return rt.Delete(ctx, sb.ID)
}

// gvisorPlacement places a new container of a gVisor pod in the pod's sandbox.
func (cc *containerCreate) gvisorPlacement() (*oci.GvisorPlacement, error) {
	if !cc.sb.Gvisor {
		return nil, nil
	}
	g := &oci.GvisorPlacement{SandboxID: cc.sb.ID, OwnPIDKey: oci.GvisorOwnPIDKey(cc.bundle)}
	if cc.sb.UTSNSPath == "" {
		g.Hostname, _ = os.Hostname()
	}
	if gvisorPodSharesPID(cc.sb) {
		g.PodPIDKey = oci.GvisorPodPIDKey(cc.sb.Dir)
	}
	ns := cc.cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns.GetPid() == runtimeapi.NamespaceMode_TARGET {
		t, err := cc.s.containers.Get(ns.GetTargetId())
		if err != nil {
			return nil, err
		}
		g.TargetPIDKey = gvisorPIDKey(cc.sb, t)
	}
	return g, nil
}

// gvisorPodSharesPID reports a pod whose containers share one PID namespace (when they ask).
func gvisorPodSharesPID(sb *store.Sandbox) bool {
	return sb.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid() == runtimeapi.NamespaceMode_POD
}

// gvisorPIDKey names the PID namespace container c of pod sb lives in inside the sandbox.
func gvisorPIDKey(sb *store.Sandbox, c *store.Container) string {
	switch c.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid() {
	case runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_NODE:
		if gvisorPodSharesPID(sb) {
			return oci.GvisorPodPIDKey(sb.Dir)
		}
	}
	// A debug container targeting c shares c's own namespace; one targeting such a debug
	// container is not something kubectl makes.
	return oci.GvisorOwnPIDKey(c.Bundle)
}

// startInRuntime starts a created container: a gVisor subcontainer through the waiter conmon
// holds it with (runsc gives it the stdio of whoever runs start), any other through the runtime.
func (m *containerManager) startInRuntime(ctx context.Context, rt *oci.Runtime, c *store.Container) error {
	if rt.Sandboxed() {
		if _, err := os.Stat(filepath.Join(c.Bundle, oci.GvisorStartGate)); err == nil {
			return oci.StartThroughGate(ctx, c.Bundle)
		}
	}
	return rt.Start(ctx, c.ID)
}

// openStartGate lets the waiter of a gVisor subcontainer that will never start go on to its end;
// for other runtimes it does nothing.
func (m *containerManager) openStartGate(rt *oci.Runtime, c *store.Container) {
	if !rt.Sandboxed() {
		return
	}
	if err := oci.OpenStartGate(c.Bundle); err != nil {
		m.log.Warn("open the start gate of a gVisor container", "id", c.ID, "err", err)
	}
}

// deleteOrphanGvisorSandbox ends a gVisor sandbox whose pod has no record (a Run cut short), in
// every gVisor handler: the runsc state names the sandbox by the pod's ID.
func (s *Engine) deleteOrphanGvisorSandbox(ctx context.Context, id string) error {
	var errs []error
	for name := range s.cfg.Handlers {
		rt, err := s.ctr.runtimeFor(name)
		if err != nil || !rt.Sandboxed() {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, sweepStepTimeout)
		errs = append(errs, rt.Delete(dctx, id))
		cancel()
	}
	return errors.Join(errs...)
}
