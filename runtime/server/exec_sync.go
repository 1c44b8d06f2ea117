package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/oci"
)

// execSyncMaxOutput bounds each of stdout and stderr of an ExecSync: a probe that prints gigabytes
// costs the daemon this much memory and the rest is discarded (the process is not blocked).
const execSyncMaxOutput = 4 << 20

func (s *Server) ExecSync(ctx context.Context, req *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
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
	code, err := s.ExecInContainer(ctx, req.GetContainerId(), req.GetCmd(), false, nil, stdout, stderr)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil, fmt.Errorf("command %q timed out after %ds: %w", req.GetCmd(), req.GetTimeout(), context.DeadlineExceeded)
	}
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ExecSyncResponse{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), ExitCode: int32(code)}, nil
}

// ExecInContainer runs cmd in a running container with the container's own process settings
// (user, env, capabilities, cwd) and waits for it; ctx's end kills it. It is the building block of
// ExecSync and of the streaming server's non-tty Exec.
func (s *Server) ExecInContainer(ctx context.Context, containerID string, cmd []string, tty bool, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	c, err := s.containers.Get(containerID)
	if err != nil {
		return -1, fmt.Errorf("container %q: %w", containerID, err)
	}
	if st := c.Snapshot(); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return -1, fmt.Errorf("container %s is not running: %w", c.ID, errdefs.ErrFailedPrecondition)
	}
	p, err := s.execProcess(c.Bundle, cmd, tty)
	if err != nil {
		return -1, err
	}
	rt, err := s.runtimeFor(c.Handler)
	if err != nil {
		return -1, err
	}
	return rt.Exec(ctx, c.ID, c.Bundle, p, stdin, stdout, stderr)
}

// execProcess is the container's process spec with cmd as its arguments.
func (s *Server) execProcess(bundle string, cmd []string, tty bool) (*specs.Process, error) {
	spec, err := oci.ReadSpec(bundle)
	if err != nil {
		return nil, fmt.Errorf("container spec: %w", err)
	}
	p := *spec.Process
	p.Args = cmd
	p.Terminal = tty
	p.ConsoleSize = nil
	p.OOMScoreAdj = nil // set once, for the container; an exec inherits it
	return &p, nil
}
