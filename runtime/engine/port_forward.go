package engine

import (
	"context"
	"fmt"
	"io"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/streaming"
)

// CheckSandboxReady reports why connections cannot be forwarded to ports of a sandbox (NotFound,
// FailedPrecondition), or nil when they can.
func (s *Engine) CheckSandboxReady(id string) error {
	_, err := s.readySandbox(id)
	return err
}

// readySandbox finds a ready sandbox's network namespace ("" for the host's).
func (s *Engine) readySandbox(id string) (string, error) {
	sb, err := s.sandboxes.Get(id)
	if err != nil {
		return "", fmt.Errorf("sandbox %q: %w", id, err)
	}
	if sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return "", fmt.Errorf("sandbox %s is not ready: %w", sb.ID, errdefs.ErrFailedPrecondition)
	}
	return sb.NetNSPath, nil
}

// PortForward connects to the port on the pod's loopback inside its network namespace (the host's
// for a host-network pod, whose NetNSPath is empty). A gVisor pod's loopback is inside the
// Sentry, out of the host's reach: the port is reached on the pod's IP instead.
func (r streamRuntime) PortForward(ctx context.Context, sandboxID string, port int32, stream io.ReadWriteCloser) error {
	netns, err := r.s.readySandbox(sandboxID)
	if err != nil {
		stream.Close()
		return err
	}
	if sb, err := r.s.sandboxes.Get(sandboxID); err == nil && sb.Gvisor && netns != "" {
		return streaming.PortForwardToPodIPs(ctx, sb.IPs, port, stream)
	}
	return streaming.PortForwardInNetNS(ctx, netns, port, stream)
}
