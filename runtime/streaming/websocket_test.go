package streaming

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	clientexec "k8s.io/client-go/util/exec"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func wsExec(t *testing.T, rawURL string, opts remotecommand.StreamOptions) error {
	t.Helper()
	ex, err := remotecommand.NewWebSocketExecutor(&rest.Config{}, "GET", rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return ex.StreamWithContext(t.Context(), opts)
}

// TestWebSocketV5 drives exec and attach with client-go's WebSocket executor, which speaks only
// v5.channel.k8s.io: stdin is half-closed by the protocol, the exit code comes back, resizes
// arrive, and the token is still single-use across protocols.
func TestWebSocketV5(t *testing.T) {
	f := &fakeRuntime{}
	s := newServer(t, f)

	resp, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"fail"}, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	err = wsExec(t, resp.Url, remotecommand.StreamOptions{Stdin: strings.NewReader("over v5"), Stdout: &out, Stderr: &errb})
	var ce clientexec.CodeExitError
	if !errors.As(err, &ce) || ce.Code != 3 {
		t.Fatalf("err = %v, want exit code 3", err)
	}
	if out.String() != "id=c1 cmd=fail tty=false stdin=\"over v5\"\n" || errb.String() != "to stderr\n" {
		t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
	}
	// Replaying the token, with either protocol, gets nothing.
	if err := wsExec(t, resp.Url, remotecommand.StreamOptions{Stdout: io.Discard}); err == nil {
		t.Fatal("token reused over WebSocket")
	}
	u := execURL(t, s, &runtimeapi.ExecRequest{ContainerId: "c1", Cmd: []string{"true"}, Stdout: true})
	if err := wsExec(t, u.String(), remotecommand.StreamOptions{Stdout: io.Discard}); err != nil {
		t.Fatal(err)
	}
	if err := spdyExec(t, u, remotecommand.StreamOptions{Stdout: io.Discard}); err == nil {
		t.Fatal("a token used over WebSocket worked again over SPDY")
	}

	t.Run("tty and resize", func(t *testing.T) {
		resp, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "c2", Cmd: []string{"sh"}, Tty: true, Stdout: true})
		if err != nil {
			t.Fatal(err)
		}
		q := sizeQueue{ch: make(chan *remotecommand.TerminalSize, 1)}
		q.ch <- &remotecommand.TerminalSize{Width: 132, Height: 43}
		var out bytes.Buffer
		if err := wsExec(t, resp.Url, remotecommand.StreamOptions{Stdout: &out, Tty: true, TerminalSizeQueue: q}); err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.sizes) == 0 || f.sizes[len(f.sizes)-1] != (TerminalSize{Width: 132, Height: 43}) || !strings.Contains(out.String(), "tty=true") {
			t.Fatalf("sizes %v, stdout %q", f.sizes, out.String())
		}
	})

	t.Run("attach", func(t *testing.T) {
		resp, err := s.GetAttach(&runtimeapi.AttachRequest{ContainerId: "c3", Stdout: true})
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := wsExec(t, resp.Url, remotecommand.StreamOptions{Stdout: &out}); err != nil {
			t.Fatal(err)
		}
		if out.String() != "attached to c3\n" {
			t.Fatalf("stdout %q", out.String())
		}
	})
}
