package engine

import (
	"context"
	"fmt"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// RemoveSandbox removes the pod's containers (forcibly, if they run), stops it if it was not
// stopped, and deletes everything it had. Removing a sandbox that is already gone is success.
func (s *Engine) RemoveSandbox(ctx context.Context, id string) error {
	sb, err := s.sandboxes.Get(id)
	if errdefs.IsNotFound(err) {
		s.log.Debug("RemovePodSandbox of an unknown sandbox: already removed", "id", id)
		return nil
	}
	if err != nil {
		return err
	}
	unlock := s.sb.lock(sb.ID)
	defer unlock()
	if err := s.removeContainersOfSandbox(ctx, sb.ID); err != nil {
		return fmt.Errorf("remove containers of sandbox %s: %w", sb.ID, err)
	}
	if err := s.stopSandboxLocked(ctx, sb.ID); err != nil {
		return err
	}
	sb, err = s.sandboxes.Get(sb.ID)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := s.releaseSandbox(ctx, sb); err != nil {
		return err
	}
	s.sandboxes.Delete(sb.ID)
	s.sandboxes.ReleaseName(sb.Name, sb.ID)
	return nil
}
