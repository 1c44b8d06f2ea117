package podresources

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	"github.com/nodelet/nodelet/internal/unixsock"
)

// SocketPath is where the kubelet serves the API under its root dir, and so where its clients
// (which mount /var/lib/kubelet/pod-resources) look for it.
func SocketPath(rootDir string) string {
	return filepath.Join(rootDir, "pod-resources", "kubelet.sock")
}

// errRateLimited is the kubelet's answer to a client over the limit.
var errRateLimited = status.Error(codes.ResourceExhausted, "rejected by rate limit")

// Serve serves the API on a unix socket at socketPath until ctx ends, then removes the socket so
// clients do not find a dead one. It returns nil once ctx has ended.
//
// The socket is root's alone (0600; the kubelet's is 0755 from the umask, which lets only its
// owner connect as well): the API tells which devices and CPUs every pod holds. A socket left at
// the path by an earlier process is replaced; anything else there is refused, not deleted.
func (s *Server) Serve(ctx context.Context, socketPath string) error {
	l, err := listen(socketPath)
	if err != nil {
		return fmt.Errorf("PodResources API: %w", err)
	}
	defer os.Remove(socketPath)
	g := grpc.NewServer(grpc.UnaryInterceptor(s.limit))
	podresourcesv1.RegisterPodResourcesListerServer(g, s)
	s.d.Log.Info("serving the PodResources API", "socket", socketPath, "qps", qps, "burst", burst)
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(l) }()
	select {
	case err := <-errc:
		return fmt.Errorf("PodResources API: %w", err)
	case <-ctx.Done():
		g.Stop()
		<-errc
		return nil
	}
}

// limit refuses a call once the client has spent its burst, as the kubelet's interceptor does.
func (s *Server) limit(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if !s.limiter.AllowN(s.now(), 1) {
		return nil, errRateLimited
	}
	return h(ctx, req)
}

// listen makes the socket at path, mode 0600 from its first moment: it is bound in a private
// folder beside path, then renamed over it, which also replaces a stale socket atomically.
func listen(path string) (net.Listener, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() != fs.ModeSocket {
		return nil, fmt.Errorf("%s exists and is not a socket", path)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	tmp, err := os.MkdirTemp(dir, ".podresources-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bound := filepath.Join(tmp, "s")
	// The name it was bound under goes with tmp; Serve removes the socket at path.
	l, err := unixsock.Listen(bound)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(bound, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	if err := os.Rename(bound, path); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}
