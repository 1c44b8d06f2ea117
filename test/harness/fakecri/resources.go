package fakecri

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

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

// FailSandboxUpdate makes UpdatePodSandboxResources answer err (nil: succeed).
func (s *Server) FailSandboxUpdate(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sandboxErr = err
}
