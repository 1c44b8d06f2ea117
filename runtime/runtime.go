// Package runtime assembles nodelet's CRI runtime: the image store, pod networking, the
// RuntimeService over them and the gRPC server that serves both CRI services on one socket. New
// builds; Run recovers what an earlier process left running and serves.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/cni"
	"github.com/nodelet/nodelet/runtime/imageservice"
	"github.com/nodelet/nodelet/runtime/imagestore"
	"github.com/nodelet/nodelet/runtime/server"
)

// Config is the runtime's whole configuration.
type Config struct {
	// Server configures the RuntimeService; New fills its Images and Network.
	Server server.Config
	// ImageDir holds the image store (blobs, layers, rootfs).
	ImageDir string
	Registry imagestore.RegistryConfig
	// Network configures pod networking through CNI; nil gives pods loopback only.
	Network *cni.Options
	// Listen is the CRI endpoint served (unix:///run/nodelet/runtime.sock).
	Listen string
}

// Runtime is the assembled runtime.
type Runtime struct {
	cfg    Config
	log    *slog.Logger
	images *imagestore.Store
	net    *cni.Manager
	once   sync.Once
	ready  chan struct{}
}

// New opens the image store and the pod network; nothing is served until Run.
func New(cfg Config) (*Runtime, error) {
	log := cfg.Server.Logger
	if log == nil {
		log = slog.Default()
		cfg.Server.Logger = log
	}
	if cfg.Listen == "" {
		return nil, errors.New("runtime: no endpoint to listen on")
	}
	r := &Runtime{cfg: cfg, log: log, ready: make(chan struct{})}
	var err error
	if r.images, err = imagestore.Open(cfg.ImageDir, imagestore.WithRegistryConfig(cfg.Registry), imagestore.WithLogger(log)); err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	r.cfg.Server.Images = r.images
	if cfg.Network != nil {
		opts := *cfg.Network
		if opts.Logger == nil {
			opts.Logger = log
		}
		if r.net, err = cni.New(opts); err != nil {
			return nil, fmt.Errorf("cni: %w", err)
		}
		r.cfg.Server.Network = r.net
	}
	return r, nil
}

// Run rebuilds the runtime's view of the sandboxes and containers that kept running, serves CRI
// until ctx ends or serving fails, and releases everything it holds; containers keep running
// under conmon. A Runtime runs once.
func (r *Runtime) Run(ctx context.Context) error {
	defer r.Close()
	// Layers left unreferenced by a crash are freed in the background; pulls do not wait for it,
	// and a stop does not either (a GC cut short is finished by the next start).
	go func() {
		if err := r.images.GC(); err != nil {
			r.log.Warn("image store GC", "err", err)
		}
	}()
	srv, err := server.New(r.cfg.Server)
	if err != nil {
		return err
	}
	defer srv.Close()
	if err := srv.Recover(ctx); err != nil {
		return err
	}
	lis, err := server.Listen(r.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	g := server.NewGRPCServer(r.log)
	srv.Register(g)
	runtimeapi.RegisterImageServiceServer(g, imageservice.New(r.images, imageservice.WithLogger(r.log)))
	served := make(chan error, 1)
	go func() { served <- g.Serve(lis) }()
	close(r.ready)
	r.log.Info("runtime serving", "listen", r.cfg.Listen, "root", r.cfg.Server.Root, "state", r.cfg.Server.State)
	select {
	case <-ctx.Done():
		g.Stop()
		<-served
		return nil
	case err := <-served:
		return fmt.Errorf("serving CRI: %w", err)
	}
}

// Ready is closed once Run has recovered and the socket accepts calls.
func (r *Runtime) Ready() <-chan struct{} { return r.ready }

// Close releases what New opened; Run calls it on its way out.
func (r *Runtime) Close() error {
	var err error
	r.once.Do(func() {
		if r.net != nil {
			err = r.net.Close()
		}
	})
	return err
}
