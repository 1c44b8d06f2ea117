package engine

import (
	"context"
	"fmt"
	"os"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/oci"
)

// UpdateContainerResources applies new limits (nil changes nothing) through the OCI runtime
// (`update`) and records them, also in the bundle's spec, so a later status or recovery sees the
// limits in force.
func (s *Engine) UpdateContainerResources(ctx context.Context, id string, res *runtimeapi.LinuxContainerResources) error {
	c, err := s.containers.Get(id)
	if err != nil {
		return fmt.Errorf("container %q: %w", id, err)
	}
	if res == nil {
		return nil
	}
	st := c.Snapshot()
	if st.State != runtimeapi.ContainerState_CONTAINER_RUNNING && st.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		return fmt.Errorf("container %s is %v: %w", c.ID, st.State, errdefs.ErrFailedPrecondition)
	}
	var r specs.LinuxResources
	if err := oci.ApplyResources(&r, res); err != nil {
		return err
	}
	rt, err := s.ctr.runtimeFor(c.Handler)
	if err != nil {
		return err
	}
	if err := rt.Update(ctx, c.ID, c.Bundle, &r); err != nil {
		return err
	}
	// What was not in the request stays as it was, in the spec and in the status: an update may
	// name only the fields it changes (the kubelet's CPU manager sends only a cpuset).
	if spec, err := oci.ReadSpec(c.Bundle); err == nil && spec.Linux != nil {
		if spec.Linux.Resources == nil {
			spec.Linux.Resources = &specs.LinuxResources{}
		}
		if err := oci.ApplyResources(spec.Linux.Resources, res); err == nil {
			_ = oci.WriteBundle(c.Bundle, spec)
		}
	}
	c.Lock()
	merged := proto.Clone(res).(*runtimeapi.LinuxContainerResources)
	if c.Status.Resources != nil {
		merged = proto.Clone(c.Status.Resources).(*runtimeapi.LinuxContainerResources)
		if len(res.GetHugepageLimits()) > 0 {
			merged.HugepageLimits = nil // a list is replaced, not appended to
		}
		proto.Merge(merged, res)
	}
	c.Status.Resources = oci.InForce(merged, &r)
	err = s.containerDB.Put(c.ID, c)
	c.Unlock()
	return err
}

// ReopenContainerLog has conmon reopen the log file after the kubelet rotated it.
func (s *Engine) ReopenContainerLog(ctx context.Context, id string) error {
	c, err := s.containers.Get(id)
	if err != nil {
		return fmt.Errorf("container %q: %w", id, err)
	}
	if st := c.Snapshot(); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return fmt.Errorf("container %s is not running: %w", c.ID, errdefs.ErrFailedPrecondition)
	}
	logPath := c.LogPath
	if logPath == "" {
		return nil
	}
	before, _ := os.Stat(logPath)
	if err := oci.ReopenLog(c.Bundle); err != nil {
		return err
	}
	// conmon reopens asynchronously (it writes a new file and renames it into place); the kubelet
	// expects the file to be there when the call returns, so wait for the new one.
	deadline := time.Now().Add(5 * time.Second)
	for {
		after, err := os.Stat(logPath)
		if err == nil && (before == nil || !os.SameFile(before, after)) {
			break
		}
		if time.Now().After(deadline) {
			if err == nil {
				break // reopened in place
			}
			return fmt.Errorf("container %s: log %s was not reopened: %w", c.ID, logPath, errdefs.ErrUnavailable)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}
