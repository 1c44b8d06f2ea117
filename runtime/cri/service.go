// Package cri is the runtime's gRPC edge: the CRI RuntimeService served on the daemon's socket in
// front of runtime/engine, which carries out the sandbox and container lifecycle. Each RPC, one
// file per group of RPCs, takes its request apart, calls the engine and builds the response;
// what every call needs (panics, errdefs → gRPC codes, logging) is done once, in instrument.go.
// Listen opens the socket.
package cri

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/engine"
)

// RuntimeService implements runtimeapi.RuntimeServiceServer over an engine.
type RuntimeService struct {
	runtimeapi.UnimplementedRuntimeServiceServer

	eng *engine.Engine
}

// New returns the RuntimeService of e.
func New(e *engine.Engine) *RuntimeService {
	return &RuntimeService{eng: e}
}

// Register adds the RuntimeService to a gRPC server.
func (s *RuntimeService) Register(g *grpc.Server) {
	runtimeapi.RegisterRuntimeServiceServer(g, s)
}

// Listen opens a listener for an endpoint such as unix:///run/nodelet/runtime.sock. A stale socket
// file left by a killed daemon is replaced; the socket is made mode 0660.
func Listen(endpoint string) (net.Listener, error) {
	path, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok {
		if strings.Contains(endpoint, "://") {
			return nil, fmt.Errorf("endpoint %q: only unix:// sockets are supported", endpoint)
		}
		path = endpoint
	}
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("endpoint %q: socket path must be absolute", endpoint)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o711); err != nil {
		return nil, err
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return nil, fmt.Errorf("endpoint %q: another daemon is serving it", endpoint)
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o660); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}
