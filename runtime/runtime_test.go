package runtime

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/server"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// New builds without serving; Run serves both CRI services on the socket until its context ends,
// then stops listening and leaves nothing mounted or running.
func TestNewRunServesUntilCancelled(t *testing.T) {
	testutil.Require(t, "runc", "conmon")
	dir := t.TempDir()
	sock := filepath.Join(dir, "cri.sock")
	cfg := Config{
		Server: server.Config{Root: filepath.Join(dir, "root"), State: filepath.Join(dir, "state"), DefaultHandler: "runc",
			Handlers:   map[string]server.Handler{"runc": {Name: "runc", Path: testutil.LookPath("runc"), Root: filepath.Join(dir, "state", "oci", "runc")}},
			ConmonPath: testutil.LookPath("conmon"), StreamingAddr: "127.0.0.1:0", CgroupParent: "/nodelet-runtime-test"},
		ImageDir: filepath.Join(dir, "root", "images"),
		Listen:   "unix://" + sock,
	}
	rt, err := New(cfg)
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

func TestNewRefusesNoEndpoint(t *testing.T) {
	if _, err := New(Config{ImageDir: t.TempDir()}); err == nil {
		t.Fatal("a runtime with nowhere to listen was built")
	}
}
