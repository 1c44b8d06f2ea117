package cli

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/cni"
	"github.com/nodelet/nodelet/runtime/imageservice"
	"github.com/nodelet/nodelet/runtime/imagestore"
	"github.com/nodelet/nodelet/runtime/server"
)

// runningRuntime is a CRI runtime serving on its socket.
type runningRuntime struct {
	srv  *server.Server
	stop func()
	errc <-chan error
}

// startRuntime builds the runtime from flags — image store, CNI, the RuntimeService over them —
// recovers its state and serves CRI on rf.listen.
func startRuntime(ctx context.Context, rf *runtimeFlags, log *slog.Logger) (*runningRuntime, error) {
	cfg, err := rf.config(global.root, global.state, log)
	if err != nil {
		return nil, err
	}
	regCfg, err := rf.registry.config()
	if err != nil {
		return nil, err
	}
	images, err := imagestore.Open(imageStoreDir(global.root),
		imagestore.WithRegistryConfig(regCfg), imagestore.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	cfg.Images = images
	// Layers left unreferenced by a crash are freed in the background; pulls do not wait for it.
	go func() {
		if err := images.GC(); err != nil {
			log.Warn("image store GC", "err", err)
		}
	}()
	var closers []func() error
	fail := func(err error) (*runningRuntime, error) {
		for _, c := range closers {
			c()
		}
		return nil, err
	}
	if !rf.noNetwork {
		net, err := cni.New(cni.Options{
			ConfDir: rf.cniConfDir,
			BinDirs: rf.cniBinDirs,
			// The result cache outlives a reboot, as host-local's IP store on disk does.
			StateDir:  filepath.Join(cfg.Root, "cni"),
			NoDefault: rf.noDefaultCNI,
			Logger:    log,
		})
		if err != nil {
			return nil, fmt.Errorf("cni: %w", err)
		}
		closers = append(closers, net.Close)
		cfg.Network = net
	}
	srv, err := server.New(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	closers = append([]func() error{srv.Close}, closers...)
	lis, err := server.Listen(rf.listen)
	if err != nil {
		return fail(fmt.Errorf("listen: %w", err))
	}
	g := server.NewGRPCServer(log)
	srv.Register(g)
	runtimeapi.RegisterImageServiceServer(g, imageservice.New(images, imageservice.WithLogger(log)))
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(lis) }()
	return &runningRuntime{
		srv:  srv,
		errc: errc,
		stop: func() {
			g.Stop()
			for _, c := range closers {
				c()
			}
		},
	}, nil
}
