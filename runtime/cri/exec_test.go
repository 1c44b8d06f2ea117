package cri_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	clientexec "k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// streamBuffer is safe to read while a stream writes into it.
type streamBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *streamBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *streamBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func stream(t *testing.T, rawURL string, opts remotecommand.StreamOptions) error {
	t.Helper()
	return streamB(t, rawURL, opts)
}

func streamB(t testing.TB, rawURL string, opts remotecommand.StreamOptions) error {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	if h, _, _ := net.SplitHostPort(u.Host); h != "127.0.0.1" {
		t.Errorf("streaming URL %s is not on loopback", rawURL)
	}
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return ex.StreamWithContext(ctx, opts)
}

type sizes chan *remotecommand.TerminalSize

func (q sizes) Next() *remotecommand.TerminalSize { return <-q }

func runSleeper(e *runtimetest.Env, name string, handler ...string) (string, string) {
	pod := runtimetest.PodConfig(name)
	sb := e.RunPod(pod, strings.Join(handler, ""))
	return sb, e.RunContainer(sb, pod, runtimetest.ContainerConfig("sleeper", "sleep", "1000"))
}

// waitForResize prints the terminal's size once it differs from the first one waitForSize saw.
const waitForResize = `for i in $(seq 1200); do r=$(busybox stty size); [ "$r" != "$s" ] && break; sleep 0.05; done; echo "resized $r"`

// On runc and crun: they make the exec's terminal, and only runc passes later sizes on by itself.
func TestExecStreams(t *testing.T) {
	for _, handler := range []string{"runc", "crun"} {
		t.Run(handler, func(t *testing.T) { testExecStreams(t, handler) })
	}
}

func testExecStreams(t *testing.T, handler string) {
	e := runtimetest.Start(t)
	_, id := runSleeper(e, "exec", handler)

	t.Run("stdin, stdout, stderr and exit code", func(t *testing.T) {
		resp, err := e.Runtime.Exec(e.Ctx(), &runtimeapi.ExecRequest{
			ContainerId: id, Cmd: []string{"sh", "-c", "cat; echo oops >&2; exit 3"}, Stdin: true, Stdout: true, Stderr: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		var out, errb streamBuffer
		err = stream(t, resp.Url, remotecommand.StreamOptions{Stdin: strings.NewReader("from stdin\n"), Stdout: &out, Stderr: &errb})
		var ce clientexec.CodeExitError
		if !errors.As(err, &ce) || ce.Code != 3 {
			t.Fatalf("err = %v, want exit code 3", err)
		}
		if out.String() != "from stdin\n" || errb.String() != "oops\n" {
			t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
		}
	})

	t.Run("tty with resize", func(t *testing.T) {
		resp, err := e.Runtime.Exec(e.Ctx(), &runtimeapi.ExecRequest{
			ContainerId: id, Tty: true, Stdin: true, Stdout: true,
			Cmd: []string{"sh", "-c", `[ -t 0 ] && echo is-a-tty; ` + waitForSize + `; ` + waitForResize + `; read l; echo "got $l"`},
		})
		if err != nil {
			t.Fatal(err)
		}
		q := make(sizes, 4)
		q <- &remotecommand.TerminalSize{Width: 100, Height: 40}
		stdinR, stdinW := io.Pipe()
		var out streamBuffer
		errc := make(chan error, 1)
		go func() {
			errc <- stream(t, resp.Url, remotecommand.StreamOptions{Stdin: stdinR, Stdout: &out, Tty: true, TerminalSizeQueue: q})
		}()
		eventually(t, "first size", func() bool { return strings.Contains(out.String(), "size 40 100") })
		q <- &remotecommand.TerminalSize{Width: 120, Height: 50}
		// The shell reports the new size itself, so the line is typed only after it took effect.
		eventually(t, "resize taken", func() bool { return strings.Contains(out.String(), "resized 50 120") })
		io.WriteString(stdinW, "typed\r")
		select {
		case err := <-errc:
			if err != nil {
				t.Fatalf("%v; output %q", err, out.String())
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("exec -t did not end; output %q", out.String())
		}
		close(q)
		for _, want := range []string{"is-a-tty", "40 100", "50 120", "got typed"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("output lacks %q: %q", want, out.String())
			}
		}
	})

	t.Run("errors come from the RPC", func(t *testing.T) {
		if _, err := e.Runtime.Exec(e.Ctx(), &runtimeapi.ExecRequest{ContainerId: "nope", Cmd: []string{"true"}, Stdout: true}); err == nil {
			t.Fatal("exec in a missing container got a URL")
		}
		if _, err := e.Runtime.Exec(e.Ctx(), &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"true"}, Tty: true, Stderr: true}); err == nil {
			t.Fatal("tty with stderr got a URL")
		}
	})
}

func TestAttach(t *testing.T) {
	e := runtimetest.Start(t)
	pod := runtimetest.PodConfig("attach")
	sb := e.RunPod(pod, "")
	cfg := runtimetest.ContainerConfig("reader", "sh", "-c", `echo ready; read l; echo "got $l"; echo bye >&2; sleep 1000`)
	cfg.Stdin, cfg.StdinOnce = true, true
	id := e.RunContainer(sb, pod, cfg)

	resp, err := e.Runtime.Attach(e.Ctx(), &runtimeapi.AttachRequest{ContainerId: id, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		t.Fatal(err)
	}
	stdinR, stdinW := io.Pipe()
	var out, errb streamBuffer
	errc := make(chan error, 1)
	go func() {
		errc <- stream(t, resp.Url, remotecommand.StreamOptions{Stdin: stdinR, Stdout: &out, Stderr: &errb})
	}()
	io.WriteString(stdinW, "hello\n")
	eventually(t, "the container read the line and answered", func() bool {
		return strings.Contains(out.String(), "got hello") && strings.Contains(errb.String(), "bye")
	})
	// Detaching (the client closes) ends the session; the container keeps running.
	stdinW.Close()
	if _, err := e.Runtime.StopContainer(e.Ctx(), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("attach did not end when the container stopped")
	}
}

func TestPortForward(t *testing.T) {
	e := runtimetest.Start(t)
	pod := runtimetest.PodConfig("pf")
	sb := e.RunPod(pod, "")
	web := e.RunContainer(sb, pod, runtimetest.ContainerConfig("web", "sh", "-c",
		"mkdir -p /tmp/www && echo hello-from-pod > /tmp/www/index.html && exec httpd -f -p 127.0.0.1:8080 -h /tmp/www"))
	// A refused connection ends the port-forward session, so forward only once httpd listens.
	e.WaitListening(web, 8080)

	if code, body := e.ForwardGet(sb, 8080, "/index.html"); code != 200 || body != "hello-from-pod\n" {
		t.Fatalf("GET through the forwarded port: %d %q", code, body)
	}
	if _, err := e.Runtime.PortForward(e.Ctx(), &runtimeapi.PortForwardRequest{PodSandboxId: "missing"}); err == nil {
		t.Fatal("port-forward to a missing sandbox got a URL")
	}
}
