package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/oci"
	"github.com/nodelet/nodelet/runtime/store"
)

// RemoveContainer removes a container, killing it first if it runs. Removing an unknown container
// succeeds (CRI requires it to be idempotent). The log file stays: the kubelet owns and removes it.
func (s *Engine) RemoveContainer(ctx context.Context, id string) error {
	c, err := s.containers.Get(id)
	if errors.Is(err, errdefs.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.removeContainer(ctx, c)
}

func (s *Engine) removeContainer(ctx context.Context, c *store.Container) (retErr error) {
	c.Lock()
	if c.Status.Removing {
		c.Unlock()
		return fmt.Errorf("container %s is already being removed: %w", c.ID, errdefs.ErrFailedPrecondition)
	}
	if c.Status.Starting {
		c.Unlock()
		return fmt.Errorf("container %s is starting: %w", c.ID, errdefs.ErrFailedPrecondition)
	}
	c.Status.Removing = true
	c.Unlock()
	defer func() {
		if retErr != nil {
			c.Lock()
			c.Status.Removing = false
			c.Unlock()
		}
	}()
	if err := s.ctr.stopContainer(ctx, c, 0); err != nil {
		return err
	}
	// Its conmon outlives the container by the time it takes to write the exit and close the
	// log: the files go only once it has gone, and no process of the container outlives this call.
	if err := oci.WaitMonitorExit(ctx, c.Snapshot().ConmonPid, c.ID, oci.MonitorExitGrace); err != nil {
		return err
	}
	rt, err := s.ctr.runtimeFor(c.Handler)
	if err != nil {
		return err
	}
	// The runtime's delete (a fork of runc: its state dir and cgroups) and the removal of the
	// rootfs and bundle touch nothing of each other once the container has exited, so they run
	// side by side. Each is idempotent: a failure or crash in either leaves the record, and the
	// next Remove redoes both. gVisor's sandbox may still serve the rootfs until its delete.
	deleted := make(chan error, 1)
	var filesErr error
	if rt.Sandboxed() {
		err := rt.Delete(ctx, c.ID)
		deleted <- err
		if err == nil {
			filesErr = s.removeContainerFiles(ctx, c)
		}
	} else {
		go func() { deleted <- deleteFromRuntime(ctx, rt, c) }()
		filesErr = s.removeContainerFiles(ctx, c)
	}
	if err := <-deleted; err != nil {
		return fmt.Errorf("delete container %s from its runtime: %w", c.ID, err)
	}
	if filesErr != nil {
		return filesErr
	}
	if err := os.Remove(filepath.Join(s.ctr.exitDir, c.ID)); err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := s.containerDB.Delete(c.ID); err != nil {
		return err
	}
	s.containers.Delete(c.ID)
	s.containers.ReleaseName(c.Name, c.ID)
	s.ctr.forget(c.ID)
	s.ctr.events.publish(c.ID, c.SandboxID, runtimeapi.ContainerEventType_CONTAINER_DELETED_EVENT)
	return nil
}

// removeContainerFiles removes what the container had on disk besides its record and exit file.
func (s *Engine) removeContainerFiles(ctx context.Context, c *store.Container) error {
	if s.cfg.Images != nil {
		if err := s.cfg.Images.RemoveRootfs(ctx, c.ID); err != nil {
			return fmt.Errorf("remove rootfs of %s: %w", c.ID, err)
		}
		if err := s.removeImageVolumes(ctx, c.ImageVolumes); err != nil {
			return fmt.Errorf("remove image volumes of %s: %w", c.ID, err)
		}
	}
	return os.RemoveAll(c.Bundle)
}

// removeContainersOfSandbox removes every container of a sandbox (RemovePodSandbox).
func (s *Engine) removeContainersOfSandbox(ctx context.Context, sandboxID string) error {
	var errs []error
	for _, c := range s.containers.List() {
		if c.SandboxID != sandboxID {
			continue
		}
		if err := s.removeContainer(ctx, c); err != nil {
			errs = append(errs, fmt.Errorf("remove container %s: %w", c.ID, err))
		}
	}
	return errors.Join(errs...)
}
