// Package runtimetest starts a real runtime for integration tests, built as the daemon builds it
// (runtime/config's defaults and handler discovery, runtime.New): its own root, state and
// handler dirs under the test's temp dir, a unix socket, the real runc/crun/runsc and conmon, and a
// rootfs provider over a busybox-static folder. Tests talk to it through CRI clients, as the
// kubelet would; Env.Engine reaches the engine behind them, for what CRI cannot do (play a daemon
// killed mid-call, run the engine's exec and attach sessions without the streaming server).
package runtimetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/config"
	"github.com/nodelet/nodelet/runtime/engine"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// Env is a running runtime and the clients that reach it.
type Env struct {
	Runtime  runtimeapi.RuntimeServiceClient
	Image    runtimeapi.ImageServiceClient
	Config   engine.Config  // the engine's
	Engine   *engine.Engine // the engine behind the RuntimeService served
	Endpoint string         // unix:///… of the socket
	// Rootfs is the busybox folder every container's overlay uses as its lower dir.
	Rootfs string
	// Dir is the test's temp dir holding root, state, rootfs and overlays.
	Dir string

	t      testing.TB
	opts   options
	cfg    config.Config // as the daemon resolves it; Config is its Engine
	rt     *runtime.Runtime
	stop   context.CancelFunc
	done   chan error // Run's result
	conn   *grpc.ClientConn
	socket string
}

type options struct {
	network      engine.NetworkPlugin
	imageService runtimeapi.ImageServiceServer
	mutate       []func(*engine.Config)
	keepPods     bool
}

// Option changes how Start builds the server.
type Option func(*options)

// WithNetwork gives pods a network plugin (default: none, loopback only).
func WithNetwork(p engine.NetworkPlugin) Option { return func(o *options) { o.network = p } }

// WithImageService serves img as the ImageService (default: a fake that knows only Image).
func WithImageService(img runtimeapi.ImageServiceServer) Option {
	return func(o *options) { o.imageService = img }
}

// WithConfig edits the Config before the server is built.
func WithConfig(f func(*engine.Config)) Option {
	return func(o *options) { o.mutate = append(o.mutate, f) }
}

// WithoutPodCleanup leaves sandboxes the test did not remove in place at cleanup, so that the leak
// check reports them instead of the harness tidying them away.
func WithoutPodCleanup() Option { return func(o *options) { o.keepPods = true } }

// Start builds and serves a server for t. Cleanup, registered here, removes any sandboxes the test
// left (unless WithoutPodCleanup), stops the server and then checks that no mounts, processes or
// cgroups remain under the test's dirs.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	testutil.Require(t, "runc", "crun", "runsc", "conmon", "catatonit", "busybox")
	var o options
	for _, f := range opts {
		f(&o)
	}
	dir := t.TempDir()
	// unix socket paths are limited to 108 bytes; test temp dirs can be longer.
	sockDir, err := os.MkdirTemp("", "nlt-")
	if err != nil {
		t.Fatal(err)
	}
	logw := &testWriter{t: t}
	// The daemon's defaults and its discovery of runc, crun and runsc, on the test's own dirs.
	set := config.Defaults()
	set.Conmon, set.Catatonit = testutil.LookPath("conmon"), testutil.LookPath("catatonit")
	set.CgroupParent = "/nodelet-test-" + randomHex(6)
	set.NoNetwork = true // pods get WithNetwork's network, or loopback only
	// The tests' pods that name no handler run on runc, as they were written for; a test that
	// means crun names it. The daemon's own default (crun where installed) is runtime/config's.
	set.DefaultHandler = "runc"
	rcfg, err := set.Resolve(filepath.Join(dir, "root"), filepath.Join(dir, "state"),
		slog.New(slog.NewTextHandler(logw, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	cfg := rcfg.Engine
	rootfs := filepath.Join(dir, "busybox")
	if err := testutil.WriteBusyboxRootfs(rootfs); err != nil {
		t.Fatal(err)
	}
	cfg.Images = NewOverlayProvider(rootfs, filepath.Join(dir, "overlays"))
	for _, f := range o.mutate {
		f(&cfg)
	}
	e := &Env{Config: cfg, Rootfs: rootfs, Dir: dir, t: t, opts: o,
		socket: filepath.Join(sockDir, "cri.sock"), Endpoint: "unix://" + filepath.Join(sockDir, "cri.sock")}
	e.cfg = rcfg

	// Registered first so it runs last, after the server is closed and pods are gone.
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	t.Cleanup(logw.close)
	testutil.CheckNoLeaks(t, dir)
	t.Cleanup(func() { checkNoCgroups(t, cfg.CgroupParent) })
	t.Cleanup(func() {
		if e.rt != nil && !o.keepPods {
			e.removeAllPods()
		}
		e.Stop()
	})
	e.serve()
	return e
}

// serve builds a runtime on the Env's dirs, as the daemon does, and serves it on the socket.
func (e *Env) serve() {
	e.t.Helper()
	img := e.opts.imageService
	if img == nil {
		img = &fakeImages{}
	}
	cfg := e.cfg
	cfg.Engine, cfg.Listen = e.Config, e.Endpoint
	rt, err := runtime.New(cfg,
		runtime.Deps{Images: e.Config.Images, ImageService: img, Network: e.opts.network})
	if err != nil {
		e.t.Fatalf("runtime.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	select {
	case <-rt.Ready():
	case err := <-done:
		cancel()
		e.t.Fatalf("runtime.Run: %v", err)
	}
	conn, err := grpc.NewClient("unix://"+e.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		cancel()
		<-done
		e.t.Fatalf("dial: %v", err)
	}
	e.rt, e.stop, e.done, e.conn = rt, cancel, done, conn
	e.Engine = rt.Engine()
	e.Runtime = runtimeapi.NewRuntimeServiceClient(conn)
	e.Image = runtimeapi.NewImageServiceClient(conn)
}

// Stop stops serving and closes the runtime, as a daemon exit would; pods and containers stay.
// It is safe to call more than once.
func (e *Env) Stop() {
	if e.rt == nil {
		return
	}
	e.conn.Close()
	e.stop()
	if err := <-e.done; err != nil {
		e.t.Errorf("runtime.Run: %v", err)
	}
	if err := e.rt.Close(); err != nil {
		e.t.Errorf("runtime close: %v", err)
	}
	e.rt, e.Engine, e.stop, e.done, e.conn = nil, nil, nil, nil, nil
}

// Restart stops the server and builds a new one on the same dirs, as a daemon restarted after a
// crash would; the clients in e are replaced.
func (e *Env) Restart() {
	e.t.Helper()
	e.Stop()
	e.serve()
}

// Ctx returns a context bounded well below the test timeout, for one CRI call.
func (e *Env) Ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	e.t.Cleanup(cancel)
	return ctx
}

func (e *Env) removeAllPods() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	resp, err := e.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if status.Code(err) == codes.Unimplemented {
		return
	}
	if err != nil {
		e.t.Errorf("cleanup: list sandboxes: %v", err)
		return
	}
	for _, p := range resp.Items {
		if _, err := e.Runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.Id}); err != nil {
			e.t.Errorf("cleanup: stop sandbox %s: %v", p.Id, err)
		}
		if _, err := e.Runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.Id}); err != nil {
			e.t.Errorf("cleanup: remove sandbox %s: %v", p.Id, err)
		}
	}
}

// PodConfig returns a minimal valid sandbox config with a unique uid.
func PodConfig(name string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "test", Uid: randomHex(8)},
		Hostname: name,
		Labels:   map[string]string{"app": name},
		Linux:    &runtimeapi.LinuxPodSandboxConfig{},
	}
}

// RunPod runs a sandbox from cfg and fails the test if it cannot.
func (e *Env) RunPod(cfg *runtimeapi.PodSandboxConfig, handler string) string {
	e.t.Helper()
	resp, err := e.Runtime.RunPodSandbox(e.Ctx(), &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: handler})
	if err != nil {
		e.t.Fatalf("RunPodSandbox: %v", err)
	}
	return resp.PodSandboxId
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// testWriter sends the server's log to the test's log until the test ends; background goroutines
// that log later must not make testing panic.
type testWriter struct {
	t    testing.TB
	mu   sync.Mutex
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) close() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
