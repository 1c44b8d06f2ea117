package engine

import (
	"context"
	"fmt"
	"io"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/oci"
	"github.com/nodelet/nodelet/runtime/store"
)

// ExecIO is an exec's stdio. With Tty the process gets a pseudo-terminal: Stdout receives all its
// output, Stderr is unused, and sizes sent on Resize apply to the terminal.
type ExecIO struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Tty    bool
	Resize <-chan oci.TermSize
}

// ExecInContainer runs cmd in a running container with the container's own process settings
// (user, env, capabilities, cwd) and waits for it, returning its exit code; ctx's end kills it.
// It is the building block of ExecSync and of the streaming server's Exec.
func (s *Engine) ExecInContainer(ctx context.Context, containerID string, cmd []string, stdio ExecIO) (int, error) {
	c, rt, p, err := s.execTarget(containerID, cmd, stdio.Tty)
	if err != nil {
		return -1, err
	}
	if stdio.Tty {
		out := stdio.Stdout
		if out == nil {
			out = io.Discard
		}
		return rt.ExecTTY(ctx, c.ID, c.Bundle, p, stdio.Stdin, out, stdio.Resize)
	}
	return rt.Exec(ctx, c.ID, c.Bundle, p, stdio.Stdin, stdio.Stdout, stdio.Stderr)
}

func (s *Engine) execTarget(containerID string, cmd []string, tty bool) (*store.Container, *oci.Runtime, *specs.Process, error) {
	c, err := s.containers.Get(containerID)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("container %q: %w", containerID, err)
	}
	if st := c.Snapshot(); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, nil, nil, fmt.Errorf("container %s is not running: %w", c.ID, errdefs.ErrFailedPrecondition)
	}
	if len(cmd) == 0 {
		return nil, nil, nil, fmt.Errorf("exec: empty command: %w", errdefs.ErrInvalidArgument)
	}
	p, err := execProcess(c.Bundle, cmd, tty)
	if err != nil {
		return nil, nil, nil, err
	}
	rt, err := s.ctr.runtimeFor(c.Handler)
	if err != nil {
		return nil, nil, nil, err
	}
	return c, rt, p, nil
}

// execProcess is the container's process spec with cmd as its arguments.
func execProcess(bundle string, cmd []string, tty bool) (*specs.Process, error) {
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
