package server

import "context"

// containerManager holds what the container RPCs need beyond the registry. Owned by container_*.go.
type containerManager struct{}

// initContainers rebuilds the container registry from disk and the OCI runtimes after a (re)start.
func (s *Server) initContainers(ctx context.Context) error { return nil }
