package fakecri

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// UpdateContainerResources records "UpdateContainerResources <name> cpu=<shares>/<quota> mem=<limit>"
// and reports the new figures in the container's status, as a runtime that applies them does.
// A container made with resources reports those from its creation (see CreateContainer).
func (s *Server) UpdateContainerResources(_ context.Context, r *runtimeapi.UpdateContainerResourcesRequest) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.containers[r.ContainerId]
	if !ok {
		return nil, notFound("container", r.ContainerId)
	}
	l := r.GetLinux()
	s.record("UpdateContainerResources %s cpu=%d/%d mem=%d", c.Metadata.Name, l.GetCpuShares(), l.GetCpuQuota(), l.GetMemoryLimitInBytes())
	if err := s.updateErrs[c.Metadata.Name]; err != nil {
		return nil, status.Error(codes.Unknown, err.Error())
	}
	if l != nil {
		c.Resources = &runtimeapi.ContainerResources{Linux: proto.Clone(l).(*runtimeapi.LinuxContainerResources)}
	}
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// ContainerStats reports the memory usage SetMemoryUsage gave the container (zero otherwise).
func (s *Server) ContainerStats(_ context.Context, r *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.containers[r.ContainerId]
	if !ok {
		return nil, notFound("container", r.ContainerId)
	}
	return &runtimeapi.ContainerStatsResponse{Stats: &runtimeapi.ContainerStats{
		Attributes: &runtimeapi.ContainerAttributes{Id: c.Id, Metadata: c.Metadata},
		Memory:     &runtimeapi.MemoryUsage{UsageBytes: &runtimeapi.UInt64Value{Value: s.memUsage[c.Metadata.Name]}},
	}}, nil
}

// SetMemoryUsage makes ContainerStats report usage bytes for the named container.
func (s *Server) SetMemoryUsage(name string, bytes uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.memUsage[name] = bytes
}

// FailUpdate makes UpdateContainerResources of the named container fail with err (nil: succeed).
func (s *Server) FailUpdate(name string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updateErrs[name] = err
}
