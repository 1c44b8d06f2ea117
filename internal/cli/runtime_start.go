package cli

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nodelet/nodelet/runtime/server"
)

// runningRuntime is a CRI runtime serving on its socket.
type runningRuntime struct {
	srv  *server.Server
	stop func()
	errc <-chan error
}

// startRuntime builds the runtime from flags, recovers its state and serves CRI on rf.listen.
func startRuntime(ctx context.Context, rf *runtimeFlags, log *slog.Logger) (*runningRuntime, error) {
	cfg, err := rf.config(global.root, global.state, log)
	if err != nil {
		return nil, err
	}
	srv, err := server.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	lis, err := server.Listen(rf.listen)
	if err != nil {
		srv.Close()
		return nil, fmt.Errorf("listen: %w", err)
	}
	g := server.NewGRPCServer(log)
	srv.Register(g)
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(lis) }()
	return &runningRuntime{
		srv:  srv,
		errc: errc,
		stop: func() {
			g.Stop()
			srv.Close()
		},
	}, nil
}
