package cri

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// Exec, Attach and PortForward only hand out a URL of the engine's streaming server
// (runtime/streaming); the client then opens the stream there and the engine does the work. The
// URL's token is single-use and expires after a minute.
//
// The container is checked here as well as when the stream opens, so that a typo gets NotFound
// from the RPC rather than a failed stream later.
func (s *RuntimeService) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	if len(req.GetCmd()) == 0 {
		return nil, fmt.Errorf("exec: empty command: %w", errdefs.ErrInvalidArgument)
	}
	if err := s.eng.CheckContainerRunning(req.GetContainerId()); err != nil {
		return nil, err
	}
	srv, err := s.eng.StreamingServer()
	if err != nil {
		return nil, err
	}
	return srv.GetExec(req)
}
