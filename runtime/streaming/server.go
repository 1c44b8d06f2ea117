// Package streaming serves the long-lived streams of CRI (exec, attach, port-forward) over HTTP
// with SPDY and WebSocket (channel.k8s.io v1-v5; v5 is served here, the rest by the library), on
// k8s.io/cri-streaming. The CRI Exec/Attach/PortForward RPCs only
// return a URL with a single-use token (valid for one minute, the library's request cache); the
// client then talks to this server directly, so the streams never pass through the kubelet.
//
// The package also holds the parts of a Runtime that do not depend on how containers are stored:
// exec with a terminal (RunWithTerminal), attach through conmon's socket (AttachConmon) and
// dialing a port inside a pod's network namespace (PortForwardInNetNS).
package streaming

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	lib "k8s.io/cri-streaming/pkg/streaming"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// Runtime does the work behind each stream; see the library's interface.
type Runtime = lib.Runtime

// TerminalSize is a resize event of a TTY session.
type TerminalSize = remotecommand.TerminalSize

// DefaultAddr keeps the server on loopback: its URLs carry bearer tokens and nothing checks who
// presents them, so it must not face the network unless TLS and a trusted path are set up.
const DefaultAddr = "127.0.0.1:0"

// ErrPlainNonLoopback is returned for a plain-HTTP server asked to listen beyond loopback.
var ErrPlainNonLoopback = errors.New("the streaming server listens beyond loopback only with TLS")

// RequireLoopback refuses addr unless it is a loopback address ("localhost", 127.0.0.0/8, ::1).
// Anyone who can reach the port and learn a URL gets a shell in a container: on the network the
// URLs and streams must be encrypted. A host name other than localhost is refused, as it may
// resolve anywhere.
func RequireLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("streaming address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("streaming address %q: %w", addr, ErrPlainNonLoopback)
}

// Config of a streaming server; the zero value is loopback on a random port, plain HTTP.
type Config struct {
	Addr string // host:port to listen on; DefaultAddr
	// BaseURL overrides the scheme and host put into returned URLs (for example when a proxy
	// fronts the server). Default: http(s)://<the listener's address>.
	BaseURL *url.URL
	// TLSConfig serves HTTPS when set.
	TLSConfig *tls.Config
	// StreamIdleTimeout closes a stream idle this long; the library's default (4h) when zero.
	StreamIdleTimeout time.Duration
	// StreamCreationTimeout bounds how long a SPDY client may take to open its streams.
	StreamCreationTimeout time.Duration
	Logger                *slog.Logger
}

// Server is a running streaming server.
type Server struct {
	lib  *lazyLib
	gate *gate
	http *http.Server
	ln   *trackingListener
	log  *slog.Logger

	wg   sync.WaitGroup
	once sync.Once
}

// New listens at once, so the URLs it hands out point at a live port from the first call, and
// serves in the background until Close.
func New(cfg Config, rt Runtime) (*Server, error) {
	if rt == nil {
		return nil, errors.New("streaming: no runtime")
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.TLSConfig == nil {
		if err := RequireLoopback(cfg.Addr); err != nil {
			return nil, err
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	libCfg := lib.DefaultConfig
	if cfg.StreamIdleTimeout > 0 {
		libCfg.StreamIdleTimeout = cfg.StreamIdleTimeout
	}
	if cfg.StreamCreationTimeout > 0 {
		libCfg.StreamCreationTimeout = cfg.StreamCreationTimeout
	}
	rawLn, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("streaming server: %w", err)
	}
	ln := newTrackingListener(rawLn)
	libCfg.Addr = ln.Addr().String()
	libCfg.TLSConfig = cfg.TLSConfig
	if cfg.BaseURL != nil {
		u := *cfg.BaseURL
		libCfg.BaseURL = &u
	} else {
		scheme := "http"
		if cfg.TLSConfig != nil {
			scheme = "https"
		}
		libCfg.BaseURL = &url.URL{Scheme: scheme, Host: ln.Addr().String()}
	}
	ls := &lazyLib{build: func() (lib.Server, error) { return lib.NewServer(libCfg, rt) }}
	g := newGate(ls, rt, libCfg.StreamIdleTimeout)
	s := &Server{
		lib:  ls,
		gate: g,
		ln:   ln,
		log:  cfg.Logger.With("component", "streaming"),
		http: &http.Server{
			Handler:           g,
			TLSConfig:         cfg.TLSConfig,
			ReadHeaderTimeout: 30 * time.Second,
		},
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		var err error
		if cfg.TLSConfig != nil {
			err = s.http.ServeTLS(ln, "", "")
		} else {
			err = s.http.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("streaming server stopped", "err", err)
		}
	}()
	s.log.Info("streaming server listening", "url", libCfg.BaseURL.String())
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// GetExec validates req and returns the URL that runs it; errors are gRPC status errors.
func (s *Server) GetExec(req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	resp, err := s.lib.GetExec(req)
	if err == nil {
		s.gate.issued(resp.Url, req)
	}
	return resp, err
}

// GetAttach validates req and returns the URL that attaches to the container.
func (s *Server) GetAttach(req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	resp, err := s.lib.GetAttach(req)
	if err == nil {
		s.gate.issued(resp.Url, req)
	}
	return resp, err
}

// GetPortForward validates req and returns the URL that forwards ports of the sandbox.
func (s *Server) GetPortForward(req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	resp, err := s.lib.GetPortForward(req)
	if err == nil {
		s.gate.issued(resp.Url, nil)
	}
	return resp, err
}

// Close stops listening and ends every open stream.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		err = s.http.Close()
		s.ln.closeAll()
		s.wg.Wait()
	})
	return err
}

// ExitError reports a command's non-zero exit code to the client (kubectl and crictl exit with it).
func ExitError(code int) error {
	return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", code), Code: code}
}
