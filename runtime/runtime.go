// Package runtime assembles nodelet's CRI runtime: the image store, pod networking, the engine
// (the sandbox and container lifecycle, with its streaming server) over them, the RuntimeService
// in front of the engine, the ImageService and the gRPC server that serves both CRI services on
// one socket. New builds all of it from a config.Config (runtime/config holds
// the defaults and finds the OCI runtimes); Run recovers what an earlier process left running and
// serves.
package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/cni"
	"github.com/nodelet/nodelet/runtime/config"
	"github.com/nodelet/nodelet/runtime/cri"
	"github.com/nodelet/nodelet/runtime/engine"
	"github.com/nodelet/nodelet/runtime/imageservice"
	"github.com/nodelet/nodelet/runtime/imagestore"
)

// Deps are parts handed to New instead of built by it: tests give containers a rootfs over a plain
// folder, a fake ImageService, a network of their own. What is handed in stays its giver's: Close
// does not close it.
type Deps struct {
	// Images, with ImageService, replace the image store at Config.ImageDir.
	Images       engine.RootfsProvider
	ImageService runtimeapi.ImageServiceServer
	// Network replaces the CNI networking of Config.Network.
	Network engine.NetworkPlugin
}

// Runtime is the assembled runtime.
type Runtime struct {
	cfg    config.Config
	log    *slog.Logger
	images *imagestore.Store // nil when Deps gave the images
	net    *cni.Manager      // nil without CNI, or when Deps gave the network
	eng    *engine.Engine
	svc    *cri.RuntimeService
	grpc   *grpc.Server

	once     sync.Once
	closeErr error
	ready    chan struct{}
}

// New builds every part of the runtime: the image store, the pod network, the engine (its
// streaming server already listening), the RuntimeService in front of it, the ImageService and the
// gRPC server carrying both. It changes nothing of the sandboxes and containers on the host, and
// nothing is served until Run.
func New(cfg config.Config, deps Deps) (rt *Runtime, retErr error) {
	log := cfg.Engine.Logger
	if log == nil {
		log = slog.Default()
		cfg.Engine.Logger = log
	}
	if cfg.Listen == "" {
		return nil, errors.New("runtime: no endpoint to listen on")
	}
	if (deps.Images == nil) != (deps.ImageService == nil) {
		return nil, errors.New("runtime: images and the ImageService are handed in together")
	}
	r := &Runtime{cfg: cfg, log: log, ready: make(chan struct{})}
	defer func() {
		if retErr != nil {
			r.Close()
		}
	}()
	imageService := deps.ImageService
	r.cfg.Engine.Images = deps.Images
	if deps.Images == nil {
		var err error
		if r.images, err = imagestore.Open(cfg.ImageDir, imagestore.WithRegistryConfig(cfg.Registry), imagestore.WithLogger(log)); err != nil {
			return nil, fmt.Errorf("image store: %w", err)
		}
		r.cfg.Engine.Images = r.images
		imageService = imageservice.New(r.images, imageservice.WithLogger(log))
	}
	r.cfg.Engine.Network = deps.Network
	if deps.Network == nil && cfg.Network != nil {
		opts := *cfg.Network
		if opts.Logger == nil {
			opts.Logger = log
		}
		var err error
		if r.net, err = cni.New(opts); err != nil {
			return nil, fmt.Errorf("cni: %w", err)
		}
		r.cfg.Engine.Network = r.net
	}
	var err error
	if r.eng, err = engine.New(r.cfg.Engine); err != nil {
		return nil, err
	}
	r.svc = cri.New(r.eng)
	r.grpc = cri.NewGRPCServer(log)
	r.svc.Register(r.grpc)
	runtimeapi.RegisterImageServiceServer(r.grpc, imageService)
	return r, nil
}

// Run rebuilds the runtime's view of the sandboxes and containers that kept running, serves CRI
// until ctx ends or serving fails, and releases everything it holds; containers keep running
// under conmon. A Runtime runs once.
func (r *Runtime) Run(ctx context.Context) error {
	defer r.Close()
	// Layers left unreferenced by a crash are freed in the background; pulls do not wait for it,
	// and a stop does not either (a GC cut short is finished by the next start).
	if r.images != nil {
		go func() {
			if err := r.images.GC(); err != nil {
				r.log.Warn("image store GC", "err", err)
			}
		}()
	}
	// Recovery is the one part of building that waits for Run: it asks the OCI runtimes about
	// every container, undoes creates cut short and kills orphaned monitors, so it needs the
	// daemon's context (a stop cuts it short), and a Runtime built but never run (nodelet up
	// whose agent fails to build) must leave the host's pods as they are.
	if err := r.eng.Recover(ctx); err != nil {
		return err
	}
	lis, err := cri.Listen(r.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	served := make(chan error, 1)
	go func() { served <- r.grpc.Serve(lis) }()
	close(r.ready)
	r.log.Info("runtime serving", "listen", r.cfg.Listen, "root", r.cfg.Engine.Root, "state", r.cfg.Engine.State)
	select {
	case <-ctx.Done():
		r.grpc.Stop()
		<-served
		return nil
	case err := <-served:
		return fmt.Errorf("serving CRI: %w", err)
	}
}

// Ready is closed once Run has recovered and the socket accepts calls.
func (r *Runtime) Ready() <-chan struct{} { return r.ready }

// Engine is the lifecycle behind the RuntimeService served, for callers in the same process that
// need more than CRI (tests play a daemon killed mid-call by ending its container watchers).
func (r *Runtime) Engine() *engine.Engine { return r.eng }

// Close releases what New built: the engine's background work and streaming server, and
// the pod network; containers keep running under conmon. Run calls it on its way out; later calls
// return the first one's error.
func (r *Runtime) Close() error {
	r.once.Do(func() {
		var errs []error
		if r.eng != nil {
			errs = append(errs, r.eng.Close())
		}
		if r.net != nil {
			errs = append(errs, r.net.Close())
		}
		r.closeErr = errors.Join(errs...)
	})
	return r.closeErr
}
