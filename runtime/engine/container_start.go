package engine

import (
	"context"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// StartContainer starts a created container. A start that fails leaves the container exited, with
// StartError as the reason.
func (s *Engine) StartContainer(ctx context.Context, id string) error {
	c, err := s.containers.Get(id)
	if err != nil {
		return fmt.Errorf("container %q: %w", id, err)
	}
	c.Lock()
	switch {
	case c.Status.Removing:
		c.Unlock()
		return fmt.Errorf("container %s is being removed: %w", c.ID, errdefs.ErrFailedPrecondition)
	case c.Status.Starting:
		c.Unlock()
		return fmt.Errorf("container %s is already starting: %w", c.ID, errdefs.ErrFailedPrecondition)
	case c.Status.State != runtimeapi.ContainerState_CONTAINER_CREATED:
		state := c.Status.State
		c.Unlock()
		return fmt.Errorf("container %s is %v, not created: %w", c.ID, state, errdefs.ErrFailedPrecondition)
	}
	c.Status.Starting = true
	c.Unlock()
	defer func() {
		c.Lock()
		c.Status.Starting = false
		c.Unlock()
	}()
	if sb, err := s.sandboxes.Get(c.SandboxID); err != nil || sb.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return fmt.Errorf("sandbox %s of container %s is not ready: %w", c.SandboxID, c.ID, errdefs.ErrFailedPrecondition)
	}
	rt, err := s.ctr.runtimeFor(c.Handler)
	if err != nil {
		return err
	}
	if err := s.ctr.startInRuntime(ctx, rt, c); err != nil {
		// A container that failed to start is over: record it so the kubelet sees why, and
		// free its monitor (which waits for a process that will never run).
		_ = rt.Kill(context.WithoutCancel(ctx), c.ID, 9, false)
		if !s.ctr.waitExit(context.WithoutCancel(ctx), c, 5*time.Second) {
			s.ctr.markExited(c, 128, time.Now(), "StartError", err.Error())
		}
		c.Lock()
		c.Status.Reason, c.Status.Message = "StartError", err.Error()
		_ = s.containerDB.Put(c.ID, c)
		c.Unlock()
		return err
	}
	c.Lock()
	c.Status.StartedAt = time.Now().UnixNano()
	if c.Status.State == runtimeapi.ContainerState_CONTAINER_CREATED {
		c.Status.State = runtimeapi.ContainerState_CONTAINER_RUNNING
	} else if c.Status.FinishedAt != 0 && c.Status.StartedAt > c.Status.FinishedAt {
		c.Status.StartedAt = c.Status.FinishedAt // it already ran to completion
	}
	err = s.containerDB.Put(c.ID, c)
	c.Unlock()
	if err != nil {
		return err
	}
	s.ctr.events.publish(c.ID, c.SandboxID, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	return nil
}
