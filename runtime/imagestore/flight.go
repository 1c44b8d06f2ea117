package imagestore

import (
	"context"
	"sync"
)

// flightGroup runs one piece of work per key however many callers ask for it at once. Unlike
// x/sync/singleflight, the work gets its own context that is cancelled only when every caller has
// given up, so one impatient caller cannot fail a pull others still wait for.
type flightGroup[T any] struct {
	mu    sync.Mutex
	calls map[string]*flight[T]
}

type flight[T any] struct {
	done    chan struct{}
	waiters int
	cancel  context.CancelFunc
	val     T
	err     error
}

func (g *flightGroup[T]) do(ctx context.Context, key string, fn func(context.Context) (T, error)) (T, error) {
	g.mu.Lock()
	if g.calls == nil {
		g.calls = map[string]*flight[T]{}
	}
	c, ok := g.calls[key]
	if !ok {
		wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		c = &flight[T]{done: make(chan struct{}), cancel: cancel}
		g.calls[key] = c
		go func() {
			c.val, c.err = fn(wctx)
			cancel()
			g.mu.Lock()
			if g.calls[key] == c {
				delete(g.calls, key)
			}
			g.mu.Unlock()
			close(c.done)
		}()
	}
	c.waiters++
	g.mu.Unlock()

	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		g.mu.Lock()
		c.waiters--
		if c.waiters == 0 {
			// Abandoned: cancel it and let the next caller start afresh rather than join a dying call.
			c.cancel()
			if g.calls[key] == c {
				delete(g.calls, key)
			}
		}
		g.mu.Unlock()
		var zero T
		return zero, ctx.Err()
	}
}
