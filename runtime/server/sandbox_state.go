package server

import "context"

// sandboxManager holds what the sandbox RPCs need beyond the registry. Owned by sandbox_*.go.
type sandboxManager struct{}

// initSandboxes rebuilds the sandbox registry from disk after a (re)start.
func (s *Server) initSandboxes(ctx context.Context) error { return nil }
