package streaming

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/streaming/pkg/httpstream/wsstream"
	utilexec "k8s.io/utils/exec"
)

// The library serves exec and attach over WebSocket only with the channel.k8s.io protocols v1-v4.
// Current clients (client-go's WebSocket executor, `crictl exec -r websocket`) speak only
// v5.channel.k8s.io, which adds a signal to half-close stdin. gate serves those requests itself
// and hands every other request to the library unchanged.
//
// Because a v5 request never reaches the library's token cache, gate also keeps the tokens
// single-use for all requests: a token is good for the first request that presents it, whatever
// its protocol, and for at most tokenTTL after it was handed out (the library's own lifetime).
const (
	v5Protocol = "v5.channel.k8s.io"
	tokenTTL   = time.Minute
)

// Stream channel numbers of the channel.k8s.io protocols.
const (
	chStdin = iota
	chStdout
	chStderr
	chError
	chResize
)

type pending struct {
	req     any // *runtimeapi.ExecRequest or *runtimeapi.AttachRequest; nil for port-forward
	expires time.Time
}

type gate struct {
	lib  http.Handler
	rt   Runtime
	idle time.Duration

	mu     sync.Mutex
	tokens map[string]pending // handed out, not yet used
	used   map[string]time.Time
}

func newGate(lib http.Handler, rt Runtime, idle time.Duration) *gate {
	return &gate{lib: lib, rt: rt, idle: idle, tokens: map[string]pending{}, used: map[string]time.Time{}}
}

// issued records a token the library handed out in rawURL.
func (g *gate) issued(rawURL string, req any) {
	tok := path.Base(rawURL)
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.prune(now)
	g.tokens[tok] = pending{req: req, expires: now.Add(tokenTTL)}
}

func (g *gate) prune(now time.Time) {
	for t, p := range g.tokens {
		if now.After(p.expires) {
			delete(g.tokens, t)
		}
	}
	for t, at := range g.used {
		if now.Sub(at) > tokenTTL {
			delete(g.used, t)
		}
	}
}

// take consumes a token; ok is false when it was used before.
func (g *gate) take(tok string) (req any, ok bool) {
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.prune(now)
	if _, seen := g.used[tok]; seen {
		return nil, false
	}
	g.used[tok] = now
	p, known := g.tokens[tok]
	delete(g.tokens, tok)
	if !known {
		// Not ours (expired, or never issued): let the library answer, as it would anyway.
		return nil, true
	}
	return p.req, true
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind, tok := path.Base(path.Dir(r.URL.Path)), path.Base(r.URL.Path)
	if kind != "exec" && kind != "attach" && kind != "portforward" {
		g.lib.ServeHTTP(w, r)
		return
	}
	req, ok := g.take(tok)
	if !ok {
		http.NotFound(w, r)
		return
	}
	if req != nil && wsstream.IsWebSocketRequestWithStreamCloseProtocol(r) {
		switch req := req.(type) {
		case *runtimeapi.ExecRequest:
			g.serveV5(w, r, req.Stdin, req.Stdout, req.Stderr, req.Tty,
				func(in io.Reader, out, errw io.WriteCloser, resize <-chan TerminalSize) error {
					return g.rt.Exec(r.Context(), req.ContainerId, req.Cmd, in, out, errw, req.Tty, resize)
				})
			return
		case *runtimeapi.AttachRequest:
			g.serveV5(w, r, req.Stdin, req.Stdout, req.Stderr, req.Tty,
				func(in io.Reader, out, errw io.WriteCloser, resize <-chan TerminalSize) error {
					return g.rt.Attach(r.Context(), req.ContainerId, in, out, errw, req.Tty, resize)
				})
			return
		}
	}
	g.lib.ServeHTTP(w, r)
}

func channel(real bool, kind wsstream.ChannelType) wsstream.ChannelType {
	if real {
		return kind
	}
	return wsstream.IgnoreChannel
}

// serveV5 upgrades to v5.channel.k8s.io, runs fn on the streams and reports its outcome on the
// error channel in the v4/v5 status format (a metav1.Status; the exit code as a cause).
func (g *gate) serveV5(w http.ResponseWriter, r *http.Request, stdin, stdout, stderr, tty bool,
	fn func(in io.Reader, out, errw io.WriteCloser, resize <-chan TerminalSize) error) {
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		v5Protocol: {Binary: true, Channels: []wsstream.ChannelType{
			chStdin:  channel(stdin, wsstream.ReadChannel),
			chStdout: channel(stdout, wsstream.WriteChannel),
			chStderr: channel(stderr && !tty, wsstream.WriteChannel),
			chError:  wsstream.WriteChannel,
			chResize: wsstream.ReadChannel,
		}},
	})
	conn.SetIdleTimeout(g.idle)
	_, streams, err := conn.Open(w, r)
	if err != nil {
		return // the handshake answered the client
	}
	defer conn.Close()
	// An empty frame on the first writable channel tells the client the streams are ready.
	switch {
	case stdout:
		streams[chStdout].Write(nil)
	case stderr && !tty:
		streams[chStderr].Write(nil)
	default:
		streams[chError].Write(nil)
	}
	var in io.Reader
	var out, errw io.WriteCloser
	if stdin {
		in = streams[chStdin]
	}
	if stdout {
		out = streams[chStdout]
	}
	if stderr && !tty {
		errw = streams[chStderr]
	}
	var resize chan TerminalSize
	if tty {
		resize = make(chan TerminalSize)
		go func() {
			defer close(resize)
			dec := json.NewDecoder(streams[chResize])
			for {
				var size TerminalSize
				if dec.Decode(&size) != nil {
					return
				}
				select {
				case resize <- size:
				case <-r.Context().Done():
					return
				}
			}
		}()
	}
	status := statusOf(fn(in, out, errw, resize))
	b, _ := json.Marshal(status)
	streams[chError].Write(b)
}

type wireStatus struct {
	Status  string       `json:"status,omitempty"`
	Message string       `json:"message,omitempty"`
	Reason  string       `json:"reason,omitempty"`
	Details *wireDetails `json:"details,omitempty"`
	Code    int32        `json:"code,omitempty"`
}

type wireDetails struct {
	Causes []wireCause `json:"causes,omitempty"`
}

type wireCause struct {
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

func statusOf(err error) wireStatus {
	if err == nil {
		return wireStatus{Status: "Success"}
	}
	var ee utilexec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return wireStatus{
			Status:  "Failure",
			Reason:  "NonZeroExitCode",
			Message: fmt.Sprintf("command terminated with non-zero exit code: %v", err),
			Details: &wireDetails{Causes: []wireCause{{Reason: "ExitCode", Message: fmt.Sprint(ee.ExitStatus())}}},
		}
	}
	return wireStatus{
		Status:  "Failure",
		Reason:  "InternalError",
		Message: fmt.Sprintf("Internal error occurred: %v", err),
		Code:    http.StatusInternalServerError,
	}
}
