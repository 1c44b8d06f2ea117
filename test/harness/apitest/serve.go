package apitest

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nodelet/nodelet/agent/server"
)

// SyncLoop is a settable SyncLoop health.
type SyncLoop struct {
	mu  sync.Mutex
	err error
}

func (s *SyncLoop) Set(err error) { s.mu.Lock(); s.err = err; s.mu.Unlock() }
func (s *SyncLoop) Healthy() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Server builds the API on the fixture.
func (f *Fixture) Server(loop *SyncLoop) *server.Server {
	d := server.Deps{NodeName: "node1", Pods: f.Pods, Events: f.Pods, Runtime: f.Runtime}
	if loop != nil {
		d.SyncLoopHealthy = loop.Healthy
	}
	return server.New(d)
}

// ServeUnix serves the API on a fresh unix socket (in a short temporary directory, as socket
// paths are limited to 108 bytes) until the test ends, and returns its path.
func (f *Fixture) ServeUnix(t testing.TB, s *server.Server) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "agentapi")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "agent.sock")
	l, err := server.ListenUnix(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := s.ServeUnixListener(ctx, l); err != nil {
			t.Errorf("serve unix: %v", err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		os.RemoveAll(dir)
	})
	return sock
}
