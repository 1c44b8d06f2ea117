package engine

import (
	"context"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// UpdatePodSandboxResources records the pod-level resources the kubelet has already written to the
// pod cgroup it manages, so that the sandbox's config (and its verbose status) reflect a resize.
func (s *Engine) UpdatePodSandboxResources(ctx context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	sb, err := s.sandboxes.Get(req.GetPodSandboxId())
	if err != nil {
		return nil, err
	}
	unlock := s.sb.lock(sb.ID)
	defer unlock()
	if sb, err = s.sandboxes.Get(sb.ID); err != nil {
		return nil, err
	}
	// The config is shared by every snapshot of the sandbox: change a copy.
	cfg := proto.Clone(sb.Config).(*runtimeapi.PodSandboxConfig)
	if cfg.Linux == nil {
		cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{}
	}
	if req.Overhead != nil {
		cfg.Linux.Overhead = req.Overhead
	}
	if req.Resources != nil {
		cfg.Linux.Resources = req.Resources
	}
	updated := sb.Clone()
	updated.Config = cfg
	if err := s.saveSandbox(updated); err != nil {
		return nil, err
	}
	return &runtimeapi.UpdatePodSandboxResourcesResponse{}, nil
}
