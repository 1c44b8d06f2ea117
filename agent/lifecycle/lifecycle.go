// Package lifecycle runs containers' postStart and preStop hooks: exec (through CRI ExecSync),
// httpGet (to the pod's IP unless a host is given, port by number or name) and sleep.
//
// The kubelet's contract: postStart runs right after the container started and before it is
// reported running; if it fails the container is killed (event FailedPostStartHook) and restarted
// per its restart policy. preStop runs before the stop signal, inside the grace period; a failure
// is reported (FailedPreStopHook) and the kill goes on.
package lifecycle

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Execer is CRI's ExecSync.
type Execer interface {
	ExecSync(ctx context.Context, in *runtimeapi.ExecSyncRequest, opts ...grpc.CallOption) (*runtimeapi.ExecSyncResponse, error)
}

// ErrHook wraps every hook failure.
var ErrHook = errors.New("lifecycle hook failed")

// Runner runs hooks.
type Runner struct {
	Exec Execer
	// HTTP is the client for httpGet hooks; nil uses one that skips TLS verification (as upstream:
	// pods serve self-signed certificates) and does not follow redirects off the pod.
	HTTP *http.Client
}

// defaultHTTP is as the kubelet's hook client: no certificate checks, no kept connections.
var defaultHTTP = &http.Client{
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true},
	CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 || req.URL.Hostname() != via[0].URL.Hostname() {
			return http.ErrUseLastResponse
		}
		return nil
	},
}

// Target is what a hook acts on.
type Target struct {
	ContainerID string
	// Container gives named ports; may be nil (a hook recorded in labels of an orphan).
	Container *v1.Container
	PodIP     string
}

// Run runs h; the context bounds it (the grace period for preStop). The returned error carries the
// hook's output for the event.
func (r *Runner) Run(ctx context.Context, t Target, h *v1.LifecycleHandler) error {
	switch {
	case h == nil:
		return nil
	case h.Exec != nil:
		timeout := int64(0)
		if d, ok := ctx.Deadline(); ok {
			timeout = max(int64(time.Until(d).Seconds()), 1)
		}
		resp, err := r.Exec.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: t.ContainerID, Cmd: h.Exec.Command, Timeout: timeout})
		if err != nil {
			return fmt.Errorf("%w: exec %v: %v", ErrHook, h.Exec.Command, err)
		}
		if resp.ExitCode != 0 {
			return fmt.Errorf("%w: exec %v: command exited with %d: %s%s", ErrHook, h.Exec.Command, resp.ExitCode, resp.Stdout, resp.Stderr)
		}
		return nil
	case h.HTTPGet != nil:
		return r.httpGet(ctx, t, h.HTTPGet)
	case h.Sleep != nil:
		select {
		case <-time.After(time.Duration(h.Sleep.Seconds) * time.Second):
			return nil
		case <-ctx.Done():
			return nil // cut short by the grace period, as upstream: not a failure
		}
	case h.TCPSocket != nil:
		return fmt.Errorf("%w: tcpSocket is not supported as a lifecycle hook", ErrHook)
	}
	return fmt.Errorf("%w: no handler", ErrHook)
}

func (r *Runner) httpGet(ctx context.Context, t Target, g *v1.HTTPGetAction) error {
	host := g.Host
	if host == "" {
		host = t.PodIP
	}
	if host == "" {
		return fmt.Errorf("%w: httpGet: the pod has no IP and the hook names no host", ErrHook)
	}
	port, err := ResolvePort(g.Port, t.Container)
	if err != nil {
		return fmt.Errorf("%w: httpGet: %v", ErrHook, err)
	}
	scheme := "http"
	if g.Scheme == v1.URISchemeHTTPS {
		scheme = "https"
	}
	path := g.Path
	if path == "" || path[0] != '/' {
		path = "/" + path
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+net.JoinHostPort(host, strconv.Itoa(port))+path, nil)
	if err != nil {
		return fmt.Errorf("%w: httpGet: %v", ErrHook, err)
	}
	for _, hd := range g.HTTPHeaders {
		if hd.Name == "Host" {
			req.Host = hd.Value
			continue
		}
		req.Header.Add(hd.Name, hd.Value)
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", "kube-lifecycle/1.36")
	}
	c := r.HTTP
	if c == nil {
		c = defaultHTTP
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("%w: httpGet %s: %v", ErrHook, req.URL, err)
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("%w: httpGet %s: HTTP status %d", ErrHook, req.URL, resp.StatusCode)
	}
	return nil
}

// ResolvePort turns a port number or a name among the container's ports into a number.
func ResolvePort(p intstr.IntOrString, c *v1.Container) (int, error) {
	if p.Type == intstr.Int {
		if p.IntVal <= 0 || p.IntVal > 65535 {
			return 0, fmt.Errorf("port %d out of range", p.IntVal)
		}
		return int(p.IntVal), nil
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil && n > 0 && n <= 65535 {
		return n, nil
	}
	if c != nil {
		for _, cp := range c.Ports {
			if cp.Name == p.StrVal {
				return int(cp.ContainerPort), nil
			}
		}
	}
	return 0, fmt.Errorf("no port named %q in the container", p.StrVal)
}
