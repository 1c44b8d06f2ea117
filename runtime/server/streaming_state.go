package server

import "context"

// streamingState holds the streaming server behind Exec, Attach and PortForward.
type streamingState struct{}

func (s *Server) initStreaming(ctx context.Context) error { return nil }

func (s *Server) closeStreaming() error { return nil }
