package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/nodelet/nodelet/agent/auth"
)

// ServeUnix serves the API on a unix socket only root may use (mode 0600, and the peer's uid is
// checked), without further authentication: the standalone default. It returns when ctx ends.
func (s *Server) ServeUnix(ctx context.Context, path string) error {
	l, err := ListenUnix(path)
	if err != nil {
		return err
	}
	return s.ServeUnixListener(ctx, l)
}

// ListenUnix makes the root-only socket at path, replacing a stale one.
func ListenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	// A socket left by a killed agent would make Listen fail; nothing else lives at our path.
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() == os.ModeSocket {
		os.Remove(path)
	}
	// Bind inside a private directory, then move the socket into place: it is root-only from its
	// first moment without touching the process-wide umask.
	tmp, err := os.MkdirTemp(filepath.Dir(path), ".agent-sock-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	l, err := net.Listen("unix", filepath.Join(tmp, "s"))
	if err != nil {
		return nil, fmt.Errorf("agent API socket: %w", err)
	}
	ul := l.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	if err := os.Chmod(filepath.Join(tmp, "s"), 0o600); err != nil {
		l.Close()
		return nil, err
	}
	if err := os.Rename(filepath.Join(tmp, "s"), path); err != nil {
		l.Close()
		return nil, err
	}
	return &unixListener{UnixListener: ul, path: path}, nil
}

// unixListener removes its socket file when closed.
type unixListener struct {
	*net.UnixListener
	path string
	once sync.Once
}

func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() { os.Remove(l.path) })
	return err
}

// ServeUnixListener is ServeUnix on a listener from ListenUnix.
func (s *Server) ServeUnixListener(ctx context.Context, l net.Listener) error {
	srv := s.httpServer(auth.RequireRoot(s))
	srv.ConnContext = auth.PeerCredContext
	return serve(ctx, srv, l)
}

// TLSOptions configure the TCP listener.
type TLSOptions struct {
	// CertFile and KeyFile are the serving certificate; empty makes a self-signed one in CertDir.
	CertFile, KeyFile, CertDir string
	// Hosts are the names and IPs the self-signed certificate is for.
	Hosts []string
	// GetCertificate, when set, supplies the certificate on each handshake instead (a rotating
	// one, e.g. from auth.ServingCertManager's Current).
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
}

// ServeTLS serves the API over HTTPS on addr (":10250"), every request through filter. A nil
// filter is refused: the TCP API always authenticates.
func (s *Server) ServeTLS(ctx context.Context, addr string, opts TLSOptions, filter *auth.Filter) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("agent API: %w", err)
	}
	return s.ServeTLSListener(ctx, l, opts, filter)
}

// ServeTLSListener is ServeTLS on a listener the caller opened (tests use port 0).
func (s *Server) ServeTLSListener(ctx context.Context, l net.Listener, opts TLSOptions, filter *auth.Filter) error {
	if filter == nil || filter.Authn == nil || filter.Authz == nil {
		l.Close()
		return errors.New("agent API over TCP needs authentication and authorization")
	}
	tlsConfig := &tls.Config{GetCertificate: opts.GetCertificate}
	if opts.GetCertificate == nil {
		cert, err := auth.ServingCert(opts.CertFile, opts.KeyFile, opts.CertDir, opts.Hosts)
		if err != nil {
			l.Close()
			return fmt.Errorf("serving certificate: %w", err)
		}
		tlsConfig.Certificates = []tls.Certificate{cert}
	}
	srv := s.httpServer(filter.Wrap(s))
	srv.TLSConfig = &tls.Config{
		Certificates:   tlsConfig.Certificates,
		GetCertificate: tlsConfig.GetCertificate,
		MinVersion:     tls.VersionTLS12,
		// Certificates are checked by the authenticator, so a bad one is a 401, not a reset.
		ClientAuth: tls.RequestClientCert,
		// Streams upgrade HTTP/1.1 connections; HTTP/2 cannot carry them.
		NextProtos: []string{"http/1.1"},
	}
	return serve(ctx, srv, tls.NewListener(l, srv.TLSConfig))
}

// httpServer bounds what a client may hold: slow headers, idle keep-alive connections and request
// bodies. There is no ReadTimeout or WriteTimeout: exec, attach, port-forward and logs -f are
// long-lived by design, and a deadline set before a hijack would cut them.
func (s *Server) httpServer(h http.Handler) *http.Server {
	l := s.d.Limits
	return &http.Server{
		Handler:           limitBody(h, l.MaxBodyBytes),
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    1 << 20,
	}
}

// limitBody refuses a body declared larger than max before anything else runs (authentication
// included), and cuts one that turns out larger while it is read.
func limitBody(h http.Handler, max int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > max {
			tooLarge(w, max)
			return
		}
		// A request without a body keeps http.NoBody: the stream proxy forwards the request, and a
		// wrapped empty body would go out as a chunked one, corrupting the upgraded stream.
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, max)
		}
		h.ServeHTTP(w, r)
	})
}

func tooLarge(w http.ResponseWriter, max int64) {
	w.Header().Set("Connection", "close")
	http.Error(w, fmt.Sprintf("request body larger than %d bytes", max), http.StatusRequestEntityTooLarge)
}

func serve(ctx context.Context, srv *http.Server, l net.Listener) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		// Hijacked streams are not tracked by Shutdown; close what is left.
		srv.Close()
		<-errc
		return nil
	}
}

// ServeConfig says where the API listens.
type ServeConfig struct {
	// Socket is the root-only unix socket ("" for none); the standalone default is
	// /run/nodelet/agent.sock.
	Socket string
	// TCPAddress, when set (":10250"), serves HTTPS there with TLS and every request through Filter.
	TCPAddress string
	TLS        TLSOptions
	Filter     *auth.Filter
}

// Serve runs the listeners cfg asks for until ctx ends or one fails.
func (s *Server) Serve(ctx context.Context, cfg ServeConfig) error {
	if cfg.Socket == "" && cfg.TCPAddress == "" {
		return errors.New("agent API: neither a socket nor a TCP address to serve on")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var listeners []func() error
	if cfg.Socket != "" {
		l, err := ListenUnix(cfg.Socket)
		if err != nil {
			return err
		}
		listeners = append(listeners, func() error { return s.ServeUnixListener(ctx, l) })
	}
	if cfg.TCPAddress != "" {
		if cfg.Filter == nil {
			return errors.New("agent API over TCP needs authentication and authorization")
		}
		l, err := net.Listen("tcp", cfg.TCPAddress)
		if err != nil {
			return fmt.Errorf("agent API: %w", err)
		}
		listeners = append(listeners, func() error { return s.ServeTLSListener(ctx, l, cfg.TLS, cfg.Filter) })
	}
	errc := make(chan error, len(listeners))
	for _, run := range listeners {
		go func() { errc <- run() }()
	}
	var first error
	for range listeners {
		if err := <-errc; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	return first
}
