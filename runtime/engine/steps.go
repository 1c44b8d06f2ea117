package engine

import (
	"context"
	"log/slog"
	"time"
)

// step is one named step of a create: RunSandbox and CreateContainer are lists of them.
type step struct {
	name string
	run  func() error
}

// runSteps runs steps in order until one fails. At debug level it logs how long each step took,
// and which failed, in one line: where a slow create spends its time is one log line away.
func (s *Engine) runSteps(ctx context.Context, what string, id func() string, steps []step) error {
	debug := s.log.Enabled(ctx, slog.LevelDebug)
	var attrs []slog.Attr
	start := time.Now()
	var err error
	for _, st := range steps {
		t := time.Now()
		err = st.run()
		if debug {
			attrs = append(attrs, slog.Duration(st.name, time.Since(t)))
		}
		if err != nil {
			if debug {
				attrs = append(attrs, slog.String("failedAt", st.name))
			}
			break
		}
	}
	if debug {
		head := []slog.Attr{slog.String("id", id()), slog.Duration("total", time.Since(start))}
		s.log.LogAttrs(ctx, slog.LevelDebug, what+" steps", append(head, attrs...)...)
	}
	return err
}
