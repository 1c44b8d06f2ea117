package engine

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// StopSandbox stops the pod's containers and releases what a stopped pod does not need: its
// init, its network (IPs go back to the pool) and its /dev/shm. CRI expects it to be called many
// times, also for sandboxes already removed: that is success.
func (s *Engine) StopSandbox(ctx context.Context, id string) error {
	sb, err := s.sandboxes.Get(id)
	if errdefs.IsNotFound(err) {
		s.log.Debug("StopPodSandbox of an unknown sandbox: nothing to reclaim", "id", id)
		return nil
	}
	if err != nil {
		return err
	}
	unlock := s.sb.lock(sb.ID)
	defer unlock()
	return s.stopSandboxLocked(ctx, sb.ID)
}

// stopSandboxLocked does Stop's work under the sandbox's lock.
func (s *Engine) stopSandboxLocked(ctx context.Context, id string) error {
	if err := s.ctr.stopContainersOf(ctx, id); err != nil {
		return fmt.Errorf("stop containers of sandbox %s: %w", id, err)
	}
	// Read again under the lock: a concurrent Stop may have done part of the work.
	sb, err := s.sandboxes.Get(id)
	if errdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if sb.State == runtimeapi.PodSandboxState_SANDBOX_NOTREADY && !sb.NetworkSetUp {
		// Stopped before: the parts are idempotent and the record needs no rewrite.
		_, err := s.stopSandboxParts(ctx, sb)
		return err
	}
	stopped, stopErr := s.stopSandboxParts(ctx, sb)
	if stopErr != nil {
		// Keep the pod READY, but remember what was released (a DEL that ran must not run again).
		stopped.State = sb.State
	}
	if err := s.saveSandbox(stopped); err != nil {
		return err
	}
	return stopErr
}
