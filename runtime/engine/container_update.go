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

// UpdateContainerResources applies new limits through the OCI runtime (`update`) and records them,
// also in the bundle's spec, so a later status or recovery sees the limits in force.
func (s *Engine) UpdateContainerResources(ctx context.Context, req *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	c, err := s.containers.Get(req.GetContainerId())
	if err != nil {
		return nil, fmt.Errorf("container %q: %w", req.GetContainerId(), err)
	}
	res := req.GetLinux()
	if res == nil {
		return &runtimeapi.UpdateContainerResourcesResponse{}, nil
	}
	st := c.Snapshot()
	if st.State != runtimeapi.ContainerState_CONTAINER_RUNNING && st.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		return nil, fmt.Errorf("container %s is %v: %w", c.ID, st.State, errdefs.ErrFailedPrecondition)
	}
	var r specs.LinuxResources
	if err := oci.ApplyResources(&r, res); err != nil {
		return nil, err
	}
	rt, err := s.ctr.runtimeFor(c.Handler)
	if err != nil {
		return nil, err
	}
	if err := rt.Update(ctx, c.ID, c.Bundle, &r); err != nil {
		return nil, err
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
	if err != nil {
		return nil, err
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// ReopenContainerLog has conmon reopen the log file after the kubelet rotated it.
func (s *Engine) ReopenContainerLog(ctx context.Context, req *runtimeapi.ReopenContainerLogRequest) (*runtimeapi.ReopenContainerLogResponse, error) {
	c, err := s.containers.Get(req.GetContainerId())
	if err != nil {
		return nil, fmt.Errorf("container %q: %w", req.GetContainerId(), err)
	}
	if st := c.Snapshot(); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, fmt.Errorf("container %s is not running: %w", c.ID, errdefs.ErrFailedPrecondition)
	}
	logPath := c.LogPath
	if logPath == "" {
		return &runtimeapi.ReopenContainerLogResponse{}, nil
	}
	before, _ := os.Stat(logPath)
	if err := oci.ReopenLog(c.Bundle); err != nil {
		return nil, err
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
			return nil, fmt.Errorf("container %s: log %s was not reopened: %w", c.ID, logPath, errdefs.ErrUnavailable)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return &runtimeapi.ReopenContainerLogResponse{}, nil
}

// CheckpointContainer is not supported.
func (s *Engine) CheckpointContainer(ctx context.Context, req *runtimeapi.CheckpointContainerRequest) (*runtimeapi.CheckpointContainerResponse, error) {
	return nil, fmt.Errorf("checkpoint: %w", errdefs.ErrUnimplemented)
}

// ListMetricDescriptors: no metrics beyond the stats RPCs yet.
func (s *Engine) ListMetricDescriptors(ctx context.Context, req *runtimeapi.ListMetricDescriptorsRequest) (*runtimeapi.ListMetricDescriptorsResponse, error) {
	return &runtimeapi.ListMetricDescriptorsResponse{}, nil
}

// ListPodSandboxMetrics: no metrics beyond the stats RPCs yet.
func (s *Engine) ListPodSandboxMetrics(ctx context.Context, req *runtimeapi.ListPodSandboxMetricsRequest) (*runtimeapi.ListPodSandboxMetricsResponse, error) {
	return &runtimeapi.ListPodSandboxMetricsResponse{}, nil
}
