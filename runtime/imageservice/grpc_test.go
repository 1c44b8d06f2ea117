package imageservice

import (
	"context"
	"log/slog"
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/imagestore"
)

// TestOverGRPC drives the service as crictl does: over a unix socket, errors as status codes.
func TestOverGRPC(t *testing.T) {
	ref := serve(t, busyboxImage(t))
	dir := t.TempDir()
	store, err := imagestore.Open(filepath.Join(dir, "images"), imagestore.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "cri.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		return resp, errdefs.ToGRPC(err)
	}))
	runtimeapi.RegisterImageServiceServer(g, New(store, WithLogger(slog.New(slog.DiscardHandler))))
	go g.Serve(lis)
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := runtimeapi.NewImageServiceClient(conn)
	ctx := ctxT(t)

	_, err = c.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec("UPPER/case")})
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad reference: %v", err)
	}
	_, err = c.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec(ref)})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("no credentials: %v", err)
	}
	r, err := c.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec(ref), Auth: &runtimeapi.AuthConfig{Username: "bob", Password: "pw"}})
	if err != nil {
		t.Fatal(err)
	}
	st, err := c.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec(r.ImageRef), Verbose: true})
	if err != nil || st.Image.GetId() != r.ImageRef || st.Info["info"] == "" {
		t.Fatalf("status %v %v", st, err)
	}
	if _, err := c.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: spec(r.ImageRef)}); err != nil {
		t.Fatal(err)
	}
	l, err := c.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil || len(l.Images) != 0 {
		t.Fatalf("list %v %v", l, err)
	}
}
