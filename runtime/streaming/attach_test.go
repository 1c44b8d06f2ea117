package streaming

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeConmon serves one attach session the way conmon does: output packets carry a stream byte,
// stdin arrives raw, and a shut-down write side means the client closed stdin.
func fakeConmon(t *testing.T, path string, gotStdin chan<- string) {
	t.Helper()
	// Bind through the dir's fd as well: the path is longer than sun_path.
	dir, err := unix.Open(filepath.Dir(path), unix.O_PATH, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dir)
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: fmt.Sprintf("/proc/self/fd/%d/", dir) + filepath.Base(path), Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.AcceptUnix()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write(append([]byte{conmonStdout}, "to stdout"...))
		c.Write(append([]byte{conmonStderr}, "to stderr"...))
		var in strings.Builder
		buf := make([]byte, 64)
		for {
			n, err := c.Read(buf)
			if n == 0 || err != nil {
				break
			}
			in.Write(buf[:n])
		}
		gotStdin <- in.String()
		c.Write(append([]byte{conmonStdout}, " bye"...))
	}()
}

func TestAttachConmonProtocol(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("deep-bundle-dir-", 8))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "attach")
	gotStdin := make(chan string, 1)
	fakeConmon(t, sock, gotStdin)

	out, errb := &syncBuffer{}, &syncBuffer{}
	resize := make(chan TerminalSize, 1)
	resized := make(chan TerminalSize, 1)
	resize <- TerminalSize{Width: 80, Height: 24}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := AttachConmon(ctx, AttachOptions{
		Socket: sock, Stdin: strings.NewReader("typed"), Stdout: out, Stderr: errb, CloseStdin: true,
		Resize: resize, OnResize: func(s TerminalSize) error { resized <- s; return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := <-gotStdin; got != "typed" {
		t.Errorf("conmon got stdin %q", got)
	}
	if out.String() != "to stdout bye" || errb.String() != "to stderr" {
		t.Errorf("stdout %q stderr %q", out.String(), errb.String())
	}
	if !out.closed || !errb.closed {
		t.Error("output streams not closed at the end of the session")
	}
	if s := <-resized; s.Width != 80 || s.Height != 24 {
		t.Errorf("resize %v", s)
	}
}

// TestAttachEndsWithTheClient: a container that never prints does not keep the session alive once
// the client is gone.
func TestAttachEndsWithTheClient(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "attach")
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err == nil {
			defer c.Close()
			io.Copy(io.Discard, c)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- AttachConmon(ctx, AttachOptions{Socket: sock, Stdout: &syncBuffer{}}) }()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("attach outlived its client")
	}
}
