// Package ctxio ties readers to a context, so a long copy (a log followed for a client, a layer
// unpacked for a pull) stops promptly once whoever asked for it has gone.
package ctxio

import (
	"context"
	"io"
)

// Reader returns r, whose reads fail with ctx's error once ctx is done. A read already blocked in
// r is not interrupted; the next one ends.
func Reader(ctx context.Context, r io.Reader) io.Reader { return reader{ctx, r} }

type reader struct {
	ctx context.Context
	r   io.Reader
}

func (c reader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
