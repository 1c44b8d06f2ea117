package streaming

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

// syncBuffer is a WriteCloser safe to read while the terminal copies into it.
type syncBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	closed bool
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never happened: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRunWithTerminal drives a shell through the pseudo-terminal: it sees a terminal of the
// requested size, gets resized mid-run, reads a line, and its exit code comes back.
func TestRunWithTerminal(t *testing.T) {
	testutil.Require(t, "busybox")
	bb := testutil.LookPath("busybox")
	cmd := exec.Command(bb, "sh", "-c", `[ -t 0 ] && echo tty; s=$(stty size); echo "$s"; while [ "$(stty size)" = "$s" ]; do sleep 0.01; done; echo "resized $(stty size)"; read line; echo "got $line"; exit 7`)
	stdinR, stdinW := io.Pipe()
	out := &syncBuffer{}
	resize := make(chan TerminalSize, 2)
	resize <- TerminalSize{Width: 100, Height: 40}
	errc := make(chan error, 1)
	go func() { errc <- RunWithTerminal(context.Background(), cmd, stdinR, out, resize, nil) }()
	waitFor(t, "first size printed", func() bool { return strings.Contains(out.String(), "40 100") })
	resize <- TerminalSize{Width: 120, Height: 50}
	// The shell reports the new size itself, so the line goes only once the ioctl landed.
	waitFor(t, "resize taken", func() bool { return strings.Contains(out.String(), "resized 50 120") })
	io.WriteString(stdinW, "hello\r")
	var err error
	select {
	case err = <-errc:
	case <-time.After(30 * time.Second):
		t.Fatalf("shell did not finish; output %q", out.String())
	}
	if code, ok := ExitCode(err); !ok || code != 7 {
		t.Fatalf("err = %v, want exit code 7; output %q", err, out.String())
	}
	got := out.String()
	for _, want := range []string{"tty", "40 100", "50 120", "got hello"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q: %q", want, got)
		}
	}
	if !out.closed {
		t.Error("stdout not closed after the terminal drained")
	}
}

func TestRunWithTerminalCancel(t *testing.T) {
	testutil.Require(t, "busybox")
	cmd := exec.Command(testutil.LookPath("busybox"), "sh", "-c", "echo started; exec sleep 1000")
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	out := &syncBuffer{}
	go func() { errc <- RunWithTerminal(ctx, cmd, nil, out, nil, nil) }()
	waitFor(t, "sleep started", func() bool { return strings.Contains(out.String(), "started") })
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("cancel did not end the command")
	}
}
