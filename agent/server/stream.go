package server

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// streamOptions reads the query the apiserver (and `nodelet exec`) sends: input, output, error and
// tty as "1", the command repeated.
type streamOptions struct {
	stdin, stdout, stderr, tty bool
}

func parseStreamOptions(r *http.Request) (streamOptions, error) {
	q := r.URL.Query()
	o := streamOptions{
		stdin:  q.Get(v1.ExecStdinParam) == "1",
		stdout: q.Get(v1.ExecStdoutParam) == "1",
		stderr: q.Get(v1.ExecStderrParam) == "1",
		tty:    q.Get(v1.ExecTTYParam) == "1",
	}
	if o.tty && o.stderr {
		// A terminal merges stderr into stdout; asking for both is the client's mistake.
		return o, fmt.Errorf("stderr and tty cannot both be true")
	}
	if !o.stdin && !o.stdout && !o.stderr {
		return o, fmt.Errorf("you must specify at least one of stdin, stdout, stderr")
	}
	return o, nil
}

func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	s.containerStream(w, r, true)
}

func (s *Server) attach(w http.ResponseWriter, r *http.Request) {
	s.containerStream(w, r, false)
}

func (s *Server) containerStream(w http.ResponseWriter, r *http.Request, isExec bool) {
	ctx := r.Context()
	o, err := parseStreamOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cmd := r.URL.Query()[v1.ExecCommandParam]
	if isExec && len(cmd) == 0 {
		http.Error(w, "no command given", http.StatusBadRequest)
		return
	}
	pod, err := s.lookupPod(r)
	if err != nil {
		fail(w, err)
		return
	}
	id, err := s.findContainer(ctx, pod, r.PathValue("container"), false)
	if err != nil {
		fail(w, err)
		return
	}
	var raw string
	if isExec {
		resp, err := s.d.Runtime.Exec(ctx, &runtimeapi.ExecRequest{ContainerId: id, Cmd: cmd, Tty: o.tty, Stdin: o.stdin, Stdout: o.stdout, Stderr: o.stderr})
		if err != nil {
			fail(w, fmt.Errorf("exec: %w", err))
			return
		}
		raw = resp.GetUrl()
	} else {
		resp, err := s.d.Runtime.Attach(ctx, &runtimeapi.AttachRequest{ContainerId: id, Tty: o.tty, Stdin: o.stdin, Stdout: o.stdout, Stderr: o.stderr})
		if err != nil {
			fail(w, fmt.Errorf("attach: %w", err))
			return
		}
		raw = resp.GetUrl()
	}
	proxyStream(w, r, raw)
}

func (s *Server) portForward(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	pod, err := s.lookupPod(r)
	if err != nil {
		fail(w, err)
		return
	}
	sandbox, err := s.findSandbox(ctx, pod)
	if err != nil {
		fail(w, err)
		return
	}
	// Ports travel in the stream headers; the runtime learns them from the client, not here.
	req := &runtimeapi.PortForwardRequest{PodSandboxId: sandbox}
	if p := r.URL.Query().Get("port"); p != "" {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil {
			http.Error(w, fmt.Sprintf("port %q: %v", p, err), http.StatusBadRequest)
			return
		}
		req.Port = []int32{int32(n)}
	}
	resp, err := s.d.Runtime.PortForward(ctx, req)
	if err != nil {
		fail(w, fmt.Errorf("port forward: %w", err))
		return
	}
	proxyStream(w, r, resp.GetUrl())
}

// proxyStream carries the client's upgraded connection through to the runtime's streaming URL.
// Proxying rather than redirecting keeps the runtime's streaming server on loopback and lets a
// client on the unix socket reach it. The standard library's reverse proxy does the upgrade
// (SPDY or WebSocket) and copies both ways; apimachinery's upgrade-aware proxy would link its
// HTML-rewriting transport and golang.org/x/net/html, whose inits run in every mode.
func proxyStream(w http.ResponseWriter, r *http.Request, raw string) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		http.Error(w, fmt.Sprintf("the runtime returned an unusable streaming URL %q", raw), http.StatusInternalServerError)
		return
	}
	if !isUpgrade(r) {
		http.Error(w, "exec, attach and port-forward need a connection upgrade (SPDY or WebSocket)", http.StatusBadRequest)
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL = &url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery}
			pr.Out.Host = u.Host
			// The caller's credentials were for us; the runtime's streaming server has its own one-time URL.
			pr.Out.Header.Del("Authorization")
			pr.Out.Header.Del("Cookie")
		},
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			slog.Warn("agent API stream proxy", "path", r.URL.Path, "err", err)
			http.Error(w, err.Error(), http.StatusInternalServerError)
		},
	}
	rp.ServeHTTP(w, r)
}

// isUpgrade tells whether r asks to switch protocols (Connection: Upgrade).
func isUpgrade(r *http.Request) bool {
	for _, v := range r.Header.Values("Connection") {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "upgrade") {
				return true
			}
		}
	}
	return false
}
