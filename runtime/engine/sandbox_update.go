package engine

import (
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// UpdateSandboxResources records the pod-level resources (overhead and resources, each nil when
// unchanged) the kubelet has already written to the pod cgroup it manages, so that the sandbox's
// config (and its verbose status) reflect a resize.
func (s *Engine) UpdateSandboxResources(id string, overhead, resources *runtimeapi.LinuxContainerResources) error {
	sb, err := s.sandboxes.Get(id)
	if err != nil {
		return err
	}
	unlock := s.sb.lock(sb.ID)
	defer unlock()
	if sb, err = s.sandboxes.Get(sb.ID); err != nil {
		return err
	}
	// The config is shared by every snapshot of the sandbox: change a copy.
	cfg := proto.Clone(sb.Config).(*runtimeapi.PodSandboxConfig)
	if cfg.Linux == nil {
		cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{}
	}
	if overhead != nil {
		cfg.Linux.Overhead = overhead
	}
	if resources != nil {
		cfg.Linux.Resources = resources
	}
	updated := sb.Clone()
	updated.Config = cfg
	return s.saveSandbox(updated)
}
