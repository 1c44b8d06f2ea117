package runtime

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/config"
	"github.com/nodelet/nodelet/runtime/engine"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// New builds without serving; Run serves both CRI services on the socket until its context ends,
// then stops listening and leaves nothing mounted or running.
func TestNewRunServesUntilCancelled(t *testing.T) {
	testutil.Require(t, "runc", "conmon")
	dir := t.TempDir()
	sock := filepath.Join(dir, "cri.sock")
	cfg := config.Config{
		Engine: engine.Config{Root: filepath.Join(dir, "root"), State: filepath.Join(dir, "state"), DefaultHandler: "runc",
			Handlers:   map[string]engine.Handler{"runc": {Name: "runc", Path: testutil.LookPath("runc"), Root: filepath.Join(dir, "state", "oci", "runc")}},
			ConmonPath: testutil.LookPath("conmon"), StreamingAddr: "127.0.0.1:0", CgroupParent: "/nodelet-runtime-test"},
		ImageDir: filepath.Join(dir, "root", "images"),
		Listen:   "unix://" + sock,
	}
	rt, err := New(cfg, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("New already listens: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	select {
	case <-rt.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the runtime never became ready")
	}
	conn, err := grpc.NewClient(cfg.Listen, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := runtimeapi.NewRuntimeServiceClient(conn).Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		t.Fatalf("RuntimeService: %v", err)
	}
	if _, err := runtimeapi.NewImageServiceClient(conn).ListImages(ctx, &runtimeapi.ListImagesRequest{}); err != nil {
		t.Fatalf("ImageService: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	short, stop := context.WithTimeout(context.Background(), 2*time.Second)
	defer stop()
	if _, err := runtimeapi.NewRuntimeServiceClient(conn).Version(short, &runtimeapi.VersionRequest{}); err == nil {
		t.Fatal("still serving after Run returned")
	}
	testutil.CheckNoLeaks(t, dir)
}

// A runtime built and closed without running (nodelet up whose agent failed to build) releases
// what New took, the streaming server's port among it, and leaves nothing behind.
func TestNewCloseWithoutRun(t *testing.T) {
	testutil.Require(t, "runc")
	dir := t.TempDir()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := free.Addr().String()
	free.Close()
	cfg := config.Config{
		Engine: engine.Config{Root: filepath.Join(dir, "root"), State: filepath.Join(dir, "state"), DefaultHandler: "runc",
			Handlers:      map[string]engine.Handler{"runc": {Name: "runc", Path: testutil.LookPath("runc"), Root: filepath.Join(dir, "state", "oci", "runc")}},
			StreamingAddr: addr},
		ImageDir: filepath.Join(dir, "root", "images"),
		Listen:   "unix://" + filepath.Join(dir, "cri.sock"),
	}
	rt, err := New(cfg, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("New did not listen for streams on %s", addr)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the streaming port is still held after Close: %v", err)
	}
	l.Close()
	testutil.CheckNoLeaks(t, dir)
}

// A streaming address that cannot be listened on fails New, before anything is served.
func TestNewFailsOnBadStreamingAddress(t *testing.T) {
	testutil.Require(t, "runc")
	dir := t.TempDir()
	cfg := config.Config{
		Engine: engine.Config{Root: filepath.Join(dir, "root"), State: filepath.Join(dir, "state"), DefaultHandler: "runc",
			Handlers:      map[string]engine.Handler{"runc": {Name: "runc", Path: testutil.LookPath("runc")}},
			StreamingAddr: "127.0.0.1:-1"},
		ImageDir: filepath.Join(dir, "root", "images"),
		Listen:   "unix://" + filepath.Join(dir, "cri.sock"),
	}
	if _, err := New(cfg, Deps{}); err == nil {
		t.Fatal("New listened on a port that cannot be")
	}
}

func TestNewRefusesImagesWithoutImageService(t *testing.T) {
	if _, err := New(config.Config{Listen: "unix:///nonexistent/cri.sock"}, Deps{Images: fakeRootfs{}}); err == nil {
		t.Fatal("a runtime with images but no ImageService was built")
	}
}

// fakeRootfs stands for a rootfs provider handed in without its ImageService.
type fakeRootfs struct{ engine.RootfsProvider }

func TestNewRefusesNoEndpoint(t *testing.T) {
	if _, err := New(config.Config{ImageDir: t.TempDir()}, Deps{}); err == nil {
		t.Fatal("a runtime with nowhere to listen was built")
	}
}
