package cri

import (
	"context"
	"errors"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/engine"
	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/oci"
)

// execSyncMaxOutput bounds each of stdout and stderr of an ExecSync: a probe that prints gigabytes
// costs the daemon this much memory and the rest is discarded (the process is not blocked).
const execSyncMaxOutput = 4 << 20

func (s *RuntimeService) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	if len(req.GetCmd()) == 0 {
		return nil, fmt.Errorf("exec: empty command: %w", errdefs.ErrInvalidArgument)
	}
	if req.GetTimeout() < 0 {
		return nil, fmt.Errorf("exec: negative timeout: %w", errdefs.ErrInvalidArgument)
	}
	stdout := &oci.LimitedBuffer{Max: execSyncMaxOutput}
	stderr := &oci.LimitedBuffer{Max: execSyncMaxOutput}
	if req.GetTimeout() > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.GetTimeout())*time.Second)
		defer cancel()
	}
	code, err := s.eng.ExecInContainer(ctx, req.GetContainerId(), req.GetCmd(), engine.ExecIO{Stdout: stdout, Stderr: stderr})
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("command %q timed out after %ds: %w", req.GetCmd(), req.GetTimeout(), context.DeadlineExceeded)
	}
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ExecSyncResponse{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: int32(code)}, nil
}
