// Package apiclient talks to the agent's HTTP API over its unix socket or over HTTPS: plain
// requests, logs, and exec/attach/port-forward streams through client-go's SPDY machinery.
package apiclient

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	httpstreamspdy "k8s.io/apimachinery/pkg/util/httpstream/spdy"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/utils/exec"
)

// DefaultEndpoint is the standalone agent's socket.
const DefaultEndpoint = "unix:///run/nodelet/agent.sock"

// Client is one agent API endpoint.
type Client struct {
	endpoint string
	base     *url.URL
	http     *http.Client
	tls      *tls.Config
	dialCtx  func(ctx context.Context, network, addr string) (net.Conn, error)
}

// New parses endpoint: "unix:///path", a bare absolute path (a socket), or "https://host:port"
// (tlsConfig then carries the CA and client certificate).
func New(endpoint string, tlsConfig *tls.Config) (*Client, error) {
	c := &Client{endpoint: endpoint, tls: tlsConfig}
	switch {
	case strings.HasPrefix(endpoint, "unix://") || strings.HasPrefix(endpoint, "/"):
		path := strings.TrimPrefix(endpoint, "unix://")
		c.base = &url.URL{Scheme: "http", Host: "agent"}
		c.dialCtx = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
		c.http = &http.Client{Transport: &http.Transport{DialContext: c.dialCtx}}
	case strings.HasPrefix(endpoint, "https://") || strings.HasPrefix(endpoint, "http://"):
		u, err := url.Parse(endpoint)
		if err != nil {
			return nil, fmt.Errorf("agent endpoint %q: %w", endpoint, err)
		}
		c.base = &url.URL{Scheme: u.Scheme, Host: u.Host}
		c.http = &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig, ForceAttemptHTTP2: false}}
	default:
		return nil, fmt.Errorf("agent endpoint %q: want unix:///path or https://host:port", endpoint)
	}
	return c, nil
}

// reachError explains the usual reasons an agent cannot be reached.
func (c *Client) reachError(err error) error {
	switch {
	case errors.Is(err, os.ErrPermission):
		return fmt.Errorf("agent API at %s: %w (the agent's socket is for root; run as root)", c.endpoint, err)
	case errors.Is(err, os.ErrNotExist), errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("agent API at %s: %w (is `nodelet up` or `nodelet agent` running? --agent-endpoint names another)", c.endpoint, err)
	}
	return fmt.Errorf("agent API at %s: %w", c.endpoint, err)
}

// StatusError is an API answer other than 2xx.
type StatusError struct {
	Code int
	Msg  string
}

func (e *StatusError) Error() string {
	if e.Msg == "" {
		return http.StatusText(e.Code)
	}
	return e.Msg
}

// IsNotFound says whether err is a 404 from the API.
func IsNotFound(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusNotFound
}

func (c *Client) url(path string, q url.Values) *url.URL {
	u := *c.base
	u.Path = path
	u.RawQuery = q.Encode()
	return &u
}

// Get performs a GET and returns the body of a 2xx answer; the caller closes it.
func (c *Client) Get(ctx context.Context, path string, q url.Values) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url(path, q).String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.reachError(err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, &StatusError{Code: resp.StatusCode, Msg: strings.TrimSpace(string(b))}
	}
	return resp.Body, nil
}

// GetJSON decodes a GET's answer into out.
func (c *Client) GetJSON(ctx context.Context, path string, q url.Values, out any) error {
	body, err := c.Get(ctx, path, q)
	if err != nil {
		return err
	}
	defer body.Close()
	if err := json.NewDecoder(body).Decode(out); err != nil {
		return fmt.Errorf("agent API %s: %w", path, err)
	}
	return nil
}

// Pods lists the agent's pods.
func (c *Client) Pods(ctx context.Context) ([]v1.Pod, error) {
	var list v1.PodList
	if err := c.GetJSON(ctx, "/pods", nil, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// Pod finds one pod by namespace and name.
func (c *Client) Pod(ctx context.Context, ns, name string) (*v1.Pod, error) {
	pods, err := c.Pods(ctx)
	if err != nil {
		return nil, err
	}
	for i := range pods {
		if pods[i].Namespace == ns && pods[i].Name == name {
			return &pods[i], nil
		}
	}
	return nil, &StatusError{Code: http.StatusNotFound, Msg: fmt.Sprintf("pods %q not found", name)}
}

// Logs opens a container's log with v1.PodLogOptions' meaning.
func (c *Client) Logs(ctx context.Context, ns, pod, container string, o v1.PodLogOptions) (io.ReadCloser, error) {
	q := url.Values{}
	set := func(k string, b bool) {
		if b {
			q.Set(k, "true")
		}
	}
	set("follow", o.Follow)
	set("previous", o.Previous)
	set("timestamps", o.Timestamps)
	if o.TailLines != nil {
		q.Set("tailLines", strconv.FormatInt(*o.TailLines, 10))
	}
	if o.SinceSeconds != nil {
		q.Set("sinceSeconds", strconv.FormatInt(*o.SinceSeconds, 10))
	}
	if o.SinceTime != nil {
		q.Set("sinceTime", o.SinceTime.UTC().Format(time.RFC3339))
	}
	if o.LimitBytes != nil {
		q.Set("limitBytes", strconv.FormatInt(*o.LimitBytes, 10))
	}
	return c.Get(ctx, "/containerLogs/"+url.PathEscape(ns)+"/"+url.PathEscape(pod)+"/"+url.PathEscape(container), q)
}

// spdyTransport returns a round tripper that upgrades to SPDY over this endpoint's connection.
func (c *Client) spdyTransport() (*httpstreamspdy.SpdyRoundTripper, error) {
	cfg := httpstreamspdy.RoundTripperConfig{PingPeriod: 5 * time.Second}
	if c.dialCtx != nil {
		cfg.UpgradeTransport = &http.Transport{DialContext: c.dialCtx}
	} else {
		cfg.TLS = c.tls
		cfg.Proxier = func(*http.Request) (*url.URL, error) { return nil, nil }
	}
	return httpstreamspdy.NewRoundTripperWithConfig(cfg)
}

// StreamOptions are exec's and attach's streams.
type StreamOptions = remotecommand.StreamOptions

// ExitCode returns the remote command's exit status when err reports one.
func ExitCode(err error) (int, bool) {
	var ee utilexec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitStatus(), true
	}
	return 0, false
}

func streamQuery(o StreamOptions) url.Values {
	q := url.Values{}
	if o.Stdin != nil {
		q.Set(v1.ExecStdinParam, "1")
	}
	if o.Stdout != nil {
		q.Set(v1.ExecStdoutParam, "1")
	}
	if o.Stderr != nil && !o.Tty {
		q.Set(v1.ExecStderrParam, "1")
	}
	if o.Tty {
		q.Set(v1.ExecTTYParam, "1")
	}
	return q
}

// Exec runs cmd in a container. A non-zero exit comes back as an error ExitCode understands.
func (c *Client) Exec(ctx context.Context, ns, pod, container string, cmd []string, o StreamOptions) error {
	q := streamQuery(o)
	for _, a := range cmd {
		q.Add(v1.ExecCommandParam, a)
	}
	return c.stream(ctx, "/exec/"+url.PathEscape(ns)+"/"+url.PathEscape(pod)+"/"+url.PathEscape(container), q, o)
}

// Attach joins a running container's stdio.
func (c *Client) Attach(ctx context.Context, ns, pod, container string, o StreamOptions) error {
	return c.stream(ctx, "/attach/"+url.PathEscape(ns)+"/"+url.PathEscape(pod)+"/"+url.PathEscape(container), streamQuery(o), o)
}

func (c *Client) stream(ctx context.Context, path string, q url.Values, o StreamOptions) error {
	rt, err := c.spdyTransport()
	if err != nil {
		return err
	}
	ex, err := remotecommand.NewSPDYExecutorForTransports(rt, rt, http.MethodPost, c.url(path, q))
	if err != nil {
		return err
	}
	return ex.StreamWithContext(ctx, o)
}

// PortForwarder forwards local ports ("8080:80", "0:80", "80") to a pod until stop closes.
func (c *Client) PortForwarder(ns, pod string, ports, addresses []string, stop <-chan struct{}, ready chan struct{}, out, errOut io.Writer) (*portforward.PortForwarder, error) {
	rt, err := c.spdyTransport()
	if err != nil {
		return nil, err
	}
	var d httpstream.Dialer = spdy.NewDialer(rt, &http.Client{Transport: rt}, http.MethodPost, c.url("/portForward/"+url.PathEscape(ns)+"/"+url.PathEscape(pod), nil))
	if len(addresses) == 0 {
		addresses = []string{"localhost"}
	}
	return portforward.NewOnAddresses(d, addresses, ports, stop, ready, out, errOut)
}
