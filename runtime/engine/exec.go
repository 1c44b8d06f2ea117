package engine

import (
	"context"
	"fmt"
	"io"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/oci"
	"github.com/nodelet/nodelet/runtime/store"
	"github.com/nodelet/nodelet/runtime/streaming"
)

// The streaming server (runtime/streaming) hands out the URLs of exec, attach and port-forward
// sessions; when a client opens one, streamRuntime does the work.

// CheckContainerRunning reports why a container cannot be exec'd into or attached to (NotFound,
// FailedPrecondition), or nil when it can.
func (s *Engine) CheckContainerRunning(id string) error {
	_, err := s.runningContainer(id)
	return err
}

// runningContainer finds a container that can be exec'd into or attached to.
func (s *Engine) runningContainer(id string) (*store.Container, error) {
	c, err := s.containers.Get(id)
	if err != nil {
		return nil, fmt.Errorf("container %q: %w", id, err)
	}
	if st := c.Snapshot(); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, fmt.Errorf("container %s is not running: %w", c.ID, errdefs.ErrFailedPrecondition)
	}
	return c, nil
}

// firstSizeWait bounds the wait for a TTY client's first terminal size; a client that sends none
// (its stdin is not a terminal) costs this much once.
const firstSizeWait = 300 * time.Millisecond

// streamRuntime runs the streams the streaming server accepted.
type streamRuntime struct{ s *Engine }

var _ streaming.Runtime = streamRuntime{}

// Exec runs cmd in the container through ExecInContainer; with a terminal, all output goes to out
// and the client's sizes are passed on.
func (r streamRuntime) Exec(ctx context.Context, id string, cmd []string, in io.Reader, out, errw io.WriteCloser,
	tty bool, resize <-chan streaming.TerminalSize) error {
	stdio := ExecIO{Stdin: in, Tty: tty}
	// Only non-nil streams become writers: a nil WriteCloser must stay a nil Writer.
	if out != nil {
		stdio.Stdout = out
	}
	if errw != nil && !tty {
		stdio.Stderr = errw
	}
	if tty && resize != nil {
		// Clients send their terminal's size right after the stream opens. Waiting a moment for
		// it means the size is already queued when the process starts, so a shell's first
		// prompt (or an immediate `stty size`) sees the real size instead of 0x0.
		sizes := make(chan oci.TermSize, 1)
		select {
		case sz, ok := <-resize:
			if ok {
				sizes <- oci.TermSize{Width: sz.Width, Height: sz.Height}
			}
		case <-time.After(firstSizeWait):
		case <-ctx.Done():
			return ctx.Err()
		}
		done := make(chan struct{})
		defer close(done)
		go func() {
			for {
				select {
				case <-done:
					return
				case sz, ok := <-resize:
					if !ok {
						return
					}
					select {
					case sizes <- oci.TermSize{Width: sz.Width, Height: sz.Height}:
					case <-done:
						return
					}
				}
			}
		}()
		stdio.Resize = sizes
	}
	code, err := r.s.ExecInContainer(ctx, id, cmd, stdio)
	if err != nil {
		return err
	}
	if code != 0 {
		return streaming.ExitError(code)
	}
	return nil
}
