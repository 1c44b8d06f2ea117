package engine

import (
	"context"
	"io"

	"github.com/nodelet/nodelet/runtime/streaming"
)

// Attach connects the client to conmon's attach socket. Stdin is passed only to a container created
// with stdin; a stdin_once container's stdin closes when the client's does. Resizes go to conmon.
func (r streamRuntime) Attach(ctx context.Context, id string, in io.Reader, out, errw io.WriteCloser,
	tty bool, resize <-chan streaming.TerminalSize) error {
	target, err := r.s.ContainerAttachTarget(id)
	if err != nil {
		return err
	}
	if !target.Stdin {
		in = nil
	}
	return streaming.AttachConmon(ctx, streaming.AttachOptions{
		Socket:     target.Socket,
		Stdin:      in,
		Stdout:     out,
		Stderr:     errw,
		CloseStdin: target.StdinOnce,
		Resize:     resize,
		OnResize: func(size streaming.TerminalSize) error {
			return target.Resize(size.Width, size.Height)
		},
	})
}
