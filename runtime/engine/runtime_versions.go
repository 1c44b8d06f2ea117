package engine

import (
	"context"
	"log/slog"

	"github.com/nodelet/nodelet/runtime/oci"
)

// warnKnownEscapes checks each configured OCI runtime binary for known container escapes, in
// the background: the advice must never delay or stop the daemon's start.
func warnKnownEscapes(ctx context.Context, handlers map[string]Handler, log *slog.Logger) {
	seen := map[string]bool{}
	for _, h := range handlers {
		if seen[h.Path] {
			continue
		}
		seen[h.Path] = true
		go oci.WarnKnownEscapes(context.WithoutCancel(ctx), h.Path, log)
	}
}
