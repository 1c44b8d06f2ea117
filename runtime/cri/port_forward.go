package cri

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// PortForward hands out a URL that forwards connections to ports of the sandbox.
func (s *RuntimeService) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	if err := s.eng.CheckSandboxReady(req.GetPodSandboxId()); err != nil {
		return nil, err
	}
	srv, err := s.eng.StreamingServer()
	if err != nil {
		return nil, err
	}
	return srv.GetPortForward(req)
}
