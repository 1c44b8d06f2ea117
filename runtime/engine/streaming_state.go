package engine

import (
	"fmt"
	"sync"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/streaming"
)

// streamingState holds the streaming server behind Exec, Attach and PortForward.
type streamingState struct {
	mu  sync.Mutex
	srv *streaming.Server
}

// StreamingServer returns the streaming server, listening at Config.StreamingAddr (loopback on a
// random port when empty), which hands out the URLs of exec, attach and port-forward sessions.
func (s *Engine) StreamingServer() (*streaming.Server, error) {
	s.stream.mu.Lock()
	defer s.stream.mu.Unlock()
	if s.stream.srv != nil {
		return s.stream.srv, nil
	}
	srv, err := streaming.New(streaming.Config{Addr: s.cfg.StreamingAddr, TLSConfig: s.cfg.StreamingTLS, Logger: s.log}, streamRuntime{s})
	if err != nil {
		return nil, fmt.Errorf("%v: %w", err, errdefs.ErrUnavailable)
	}
	s.stream.srv = srv
	return srv, nil
}

// closeStreaming closes the streaming server and every stream on it.
func (s *Engine) closeStreaming() error {
	s.stream.mu.Lock()
	srv := s.stream.srv
	s.stream.srv = nil
	s.stream.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Close()
}
