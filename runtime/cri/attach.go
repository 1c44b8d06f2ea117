package cri

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Attach hands out a URL that attaches to a running container's stdio through conmon.
func (s *RuntimeService) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	if _, err := s.eng.ContainerAttachTarget(req.GetContainerId()); err != nil {
		return nil, err
	}
	srv, err := s.eng.StreamingServer()
	if err != nil {
		return nil, err
	}
	return srv.GetAttach(req)
}
