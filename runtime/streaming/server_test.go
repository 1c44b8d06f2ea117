package streaming

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	clientexec "k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/cni"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// fakeRuntime answers exec with what it was given, attach with a greeting, and forwards ports
// into one network namespace.
type fakeRuntime struct {
	netns string
	mu    sync.Mutex
	sizes []TerminalSize
}

func (f *fakeRuntime) Exec(ctx context.Context, id string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan TerminalSize) error {
	if tty && resize != nil {
		select {
		case sz := <-resize:
			f.mu.Lock()
			f.sizes = append(f.sizes, sz)
			f.mu.Unlock()
		case <-time.After(10 * time.Second):
		}
	}
	var input []byte
	if in != nil {
		input, _ = io.ReadAll(in)
	}
	fmt.Fprintf(out, "id=%s cmd=%s tty=%v stdin=%q\n", id, strings.Join(cmd, " "), tty, input)
	if errw != nil {
		fmt.Fprintf(errw, "to stderr\n")
	}
	if cmd[0] == "fail" {
		return ExitError(3)
	}
	return nil
}

func (f *fakeRuntime) Attach(ctx context.Context, id string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan TerminalSize) error {
	fmt.Fprintf(out, "attached to %s\n", id)
	return nil
}

func (f *fakeRuntime) PortForward(ctx context.Context, sandboxID string, port int32, stream io.ReadWriteCloser) error {
	return PortForwardInNetNS(ctx, f.netns, port, stream)
}

func newServer(t *testing.T, rt Runtime) *Server {
	t.Helper()
	s, err := New(Config{}, rt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func execURL(t *testing.T, s *Server, req *runtimeapi.ExecRequest) *url.URL {
	t.Helper()
	resp, err := s.GetExec(req)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(resp.Url)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestURLsAreLoopbackAndValidated(t *testing.T) {
	s := newServer(t, &fakeRuntime{})
	u := execURL(t, s, &runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"true"}, Stdout: true})
	host, _, _ := net.SplitHostPort(u.Host)
	if host != "127.0.0.1" || u.Scheme != "http" || !strings.HasPrefix(u.Path, "/exec/") {
		t.Fatalf("exec URL %s", u)
	}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"exec without container", func() error {
			_, err := s.GetExec(&runtimeapi.ExecRequest{Cmd: []string{"x"}, Stdout: true})
			return err
		}},
		{"exec tty with stderr", func() error {
			_, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "c", Cmd: []string{"x"}, Tty: true, Stderr: true})
			return err
		}},
		{"exec without streams", func() error {
			_, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "c", Cmd: []string{"x"}})
			return err
		}},
		{"attach without container", func() error { _, err := s.GetAttach(&runtimeapi.AttachRequest{Stdout: true}); return err }},
		{"port-forward without sandbox", func() error { _, err := s.GetPortForward(&runtimeapi.PortForwardRequest{}); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.call(); status.Code(err) != codes.InvalidArgument {
				t.Fatalf("err = %v, want InvalidArgument", err)
			}
		})
	}
}

func spdyExec(t *testing.T, u *url.URL, opts remotecommand.StreamOptions) error {
	t.Helper()
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return ex.StreamWithContext(ctx, opts)
}

type sizeQueue struct {
	ch chan *remotecommand.TerminalSize
}

func (q sizeQueue) Next() *remotecommand.TerminalSize { return <-q.ch }

func TestExecOverSPDYAndWebSocket(t *testing.T) {
	s := newServer(t, &fakeRuntime{})
	t.Run("spdy with stdin and exit code", func(t *testing.T) {
		u := execURL(t, s, &runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"fail", "now"}, Stdin: true, Stdout: true, Stderr: true})
		var out, errb bytes.Buffer
		err := spdyExec(t, u, remotecommand.StreamOptions{Stdin: strings.NewReader("hello"), Stdout: &out, Stderr: &errb})
		var ce clientexec.CodeExitError
		if !errors.As(err, &ce) || ce.Code != 3 {
			t.Fatalf("err = %v, want exit code 3", err)
		}
		if out.String() != "id=c1 cmd=fail now tty=false stdin=\"hello\"\n" || errb.String() != "to stderr\n" {
			t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
		}
		// The token was used up.
		if err := spdyExec(t, u, remotecommand.StreamOptions{Stdout: io.Discard}); err == nil {
			t.Fatal("a token worked twice")
		}
	})
	t.Run("spdy tty with resize", func(t *testing.T) {
		f := &fakeRuntime{}
		s := newServer(t, f)
		u := execURL(t, s, &runtimeapi.ExecRequest{ContainerId: "c2", Cmd: []string{"sh"}, Tty: true, Stdout: true})
		q := sizeQueue{ch: make(chan *remotecommand.TerminalSize, 1)}
		q.ch <- &remotecommand.TerminalSize{Width: 100, Height: 40}
		var out bytes.Buffer
		if err := spdyExec(t, u, remotecommand.StreamOptions{Stdout: &out, Tty: true, TerminalSizeQueue: q}); err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.sizes) != 1 || f.sizes[0] != (TerminalSize{Width: 100, Height: 40}) {
			t.Fatalf("sizes %v", f.sizes)
		}
		if !strings.Contains(out.String(), "tty=true") {
			t.Fatalf("stdout %q", out.String())
		}
	})
	t.Run("websocket", func(t *testing.T) {
		// The CRI streaming server speaks the channel.k8s.io WebSocket protocols (v1-v4), as the
		// kubelet's did: one byte of channel number, then data; channel 3 carries the status.
		u := execURL(t, s, &runtimeapi.ExecRequest{ContainerId: "c3", Cmd: []string{"echo", "hi"}, Stdout: true, Stderr: true})
		u.Scheme = "ws"
		d := websocket.Dialer{Subprotocols: []string{"v4.channel.k8s.io"}, HandshakeTimeout: 30 * time.Second}
		c, _, err := d.Dial(u.String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(30 * time.Second))
		streams := map[byte]string{}
		for {
			_, msg, err := c.ReadMessage()
			if err != nil {
				break
			}
			if len(msg) > 0 {
				streams[msg[0]] += string(msg[1:])
			}
		}
		if streams[1] != "id=c3 cmd=echo hi tty=false stdin=\"\"\n" || streams[2] != "to stderr\n" ||
			!strings.Contains(streams[3], "Success") {
			t.Fatalf("streams %q", streams)
		}
	})
	t.Run("attach", func(t *testing.T) {
		resp, err := s.GetAttach(&runtimeapi.AttachRequest{ContainerId: "c4", Stdout: true})
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(resp.Url)
		var out bytes.Buffer
		if err := spdyExec(t, u, remotecommand.StreamOptions{Stdout: &out}); err != nil {
			t.Fatal(err)
		}
		if out.String() != "attached to c4\n" {
			t.Fatalf("stdout %q", out.String())
		}
	})
	t.Run("unknown token", func(t *testing.T) {
		u := execURL(t, s, &runtimeapi.ExecRequest{ContainerId: "c5", Cmd: []string{"x"}, Stdout: true})
		u.Path = "/exec/notatoken"
		resp, err := http.Post(u.String(), "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
}

// TestPortForwardIntoNetNS forwards a local port, through the server, to a listener on the
// loopback of a separate network namespace (unreachable from the host otherwise).
func TestPortForwardIntoNetNS(t *testing.T) {
	testutil.Require(t)
	ns := newNetNS(t, t.TempDir())
	var ln net.Listener
	if err := cni.InNetNS(ns, func() error {
		var err error
		ln, err = net.Listen("tcp4", "127.0.0.1:7070")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b, _ := io.ReadAll(c) // until the client's half-close
				fmt.Fprintf(c, "pod got %q", b)
			}()
		}
	}()
	s := newServer(t, &fakeRuntime{netns: ns})
	resp, err := s.GetPortForward(&runtimeapi.PortForwardRequest{PodSandboxId: "sb", Port: []int32{7070}})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(resp.Url)
	tr, upgrader, err := spdy.RoundTripperFor(&rest.Config{})
	if err != nil {
		t.Fatal(err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: tr}, "POST", u)
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:7070"}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- pf.ForwardPorts() }()
	defer func() { close(stop); <-errc }()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatal(err)
	}
	ports, err := pf.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // one forwarding session carries many connections
		c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", ports[0].Local))
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(c, "hello %d", i)
		c.(*net.TCPConn).CloseWrite()
		b, err := io.ReadAll(c)
		c.Close()
		if err != nil || string(b) != fmt.Sprintf("pod got \"hello %d\"", i) {
			t.Fatalf("connection %d: %q, %v", i, b, err)
		}
	}
}

// blockingRuntime holds every exec open until its context ends.
type blockingRuntime struct {
	fakeRuntime
	started chan struct{}
}

func (b *blockingRuntime) Exec(ctx context.Context, id string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan TerminalSize) error {
	close(b.started)
	<-ctx.Done()
	return ctx.Err()
}

// TestCloseEndsOpenStreams: streams are hijacked connections, which http.Server.Close alone would
// leave running.
func TestCloseEndsOpenStreams(t *testing.T) {
	rt := &blockingRuntime{started: make(chan struct{})}
	s, err := New(Config{}, rt)
	if err != nil {
		t.Fatal(err)
	}
	u := execURL(t, s, &runtimeapi.ExecRequest{ContainerId: "c", Cmd: []string{"x"}, Stdout: true})
	errc := make(chan error, 1)
	go func() { errc <- spdyExec(t, u, remotecommand.StreamOptions{Stdout: io.Discard}) }()
	<-rt.started
	s.Close()
	select {
	case <-errc:
	case <-time.After(30 * time.Second):
		t.Fatal("an open stream outlived Close")
	}
}
