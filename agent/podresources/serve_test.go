package podresources

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

func TestSocketPath(t *testing.T) {
	if got := SocketPath("/var/lib/kubelet"); got != "/var/lib/kubelet/pod-resources/kubelet.sock" {
		t.Errorf("SocketPath = %q", got)
	}
}

// Served on a real socket, replacing a stale one, answering a gRPC client, gone once stopped.
func TestServe(t *testing.T) {
	path := SocketPath(t.TempDir())
	// A socket left by a killed agent.
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := New(Deps{Pods: fakePods{podWithSidecar()}, CPUs: fakeCPUs{"u1/app": {3}}})
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, path) }()

	// Dialled before Serve may have listened: the client retries, soon, until it has.
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 100 * time.Millisecond}}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The call waits for the socket; the deadline only bounds a broken server.
	callCtx, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	resp, err := podresourcesv1.NewPodResourcesListerClient(conn).Get(callCtx,
		&podresourcesv1.GetPodResourcesRequest{PodNamespace: "ns", PodName: "web"}, grpc.WaitForReady(true))
	if err != nil {
		t.Fatal(err)
	}
	if cs := resp.GetPodResources().GetContainers(); len(cs) != 3 || cs[1].GetName() != "app" || len(cs[1].GetCpuIds()) != 1 || cs[1].GetCpuIds()[0] != 3 {
		t.Errorf("Get over the socket: %v", resp)
	}

	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want a socket with 0600", fi.Mode())
	}
	if di, err := os.Stat(filepath.Dir(path)); err != nil || di.Mode().Perm()&0o027 != 0 {
		t.Errorf("socket folder: %v, %v; want no group write and nothing for others", di.Mode(), err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".podresources-*")); len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket still there after the stop: %v", err)
	}
}

// Only a socket is replaced: a file at the path is someone else's.
func TestServeRefusesNonSocket(t *testing.T) {
	path := SocketPath(t.TempDir())
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := New(Deps{Pods: fakePods{}}).Serve(context.Background(), path)
	if err == nil || err.Error() != "PodResources API: "+path+" exists and is not a socket" {
		t.Fatalf("Serve: %v", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "keep" {
		t.Errorf("the file was touched: %q, %v", b, err)
	}
}
