package engine

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// RemovePodSandbox removes the pod's containers (forcibly, if they run), stops it if it was not
// stopped, and deletes everything it had. Removing a sandbox that is already gone is success.
func (s *Engine) RemovePodSandbox(ctx context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	sb, err := s.sandboxes.Get(req.GetPodSandboxId())
	if errdefs.IsNotFound(err) {
		s.log.Debug("RemovePodSandbox of an unknown sandbox: already removed", "id", req.GetPodSandboxId())
		return &runtimeapi.RemovePodSandboxResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	unlock := s.sb.lock(sb.ID)
	defer unlock()
	if err := s.removeContainersOfSandbox(ctx, sb.ID); err != nil {
		return nil, fmt.Errorf("remove containers of sandbox %s: %w", sb.ID, err)
	}
	if err := s.stopSandboxLocked(ctx, sb.ID); err != nil {
		return nil, err
	}
	sb, err = s.sandboxes.Get(sb.ID)
	if errdefs.IsNotFound(err) {
		return &runtimeapi.RemovePodSandboxResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	if err := s.releaseSandbox(ctx, sb); err != nil {
		return nil, err
	}
	s.sandboxes.Delete(sb.ID)
	s.sandboxes.ReleaseName(sb.Name, sb.ID)
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}
