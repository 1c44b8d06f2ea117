package auth

import (
	"context"
	"net"
	"net/http"

	"golang.org/x/sys/unix"
)

type peerKey struct{}

// PeerCredContext is an http.Server ConnContext that records a unix-socket peer's uid. The socket
// file is root-only already; this also refuses a peer that got a descriptor to it some other way.
func PeerCredContext(ctx context.Context, c net.Conn) context.Context {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return ctx
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return ctx
	}
	var cred *unix.Ucred
	raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if err != nil || cred == nil {
		return ctx
	}
	return context.WithValue(ctx, peerKey{}, cred.Uid)
}

// RequireRoot refuses requests whose unix-socket peer is not uid 0 (or unknown).
func RequireRoot(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		uid, ok := r.Context().Value(peerKey{}).(uint32)
		if !ok || uid != 0 {
			http.Error(w, "Forbidden (the agent's local socket is for root)", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
