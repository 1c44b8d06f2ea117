package streaming

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// Conmon's attach socket protocol (SOCK_SEQPACKET): each packet from conmon starts with a byte
// naming the stream; what the client writes goes to the container's stdin.
const (
	conmonStdout = 2
	conmonStderr = 3
	// conmon reads the container's output 8 KiB at a time and prefixes the stream byte.
	conmonPacket = 8192 + 1
)

// AttachOptions are one attach session to a conmon-monitored container.
type AttachOptions struct {
	Socket string // conmon's attach socket (in the bundle dir with --full-attach)
	Stdin  io.Reader
	Stdout io.WriteCloser
	Stderr io.WriteCloser
	// CloseStdin shuts the container's stdin when Stdin ends (the container's stdin_once).
	CloseStdin bool
	// Resize receives the client's terminal sizes; OnResize forwards them (conmon's ctl fifo).
	Resize   <-chan TerminalSize
	OnResize func(TerminalSize) error
}

// dialSeqpacket connects to a unix socket whose path may be longer than sun_path allows (bundle
// dirs under deep state dirs often are): it goes through an O_PATH fd of the socket's dir.
func dialSeqpacket(path string) (*net.UnixConn, error) {
	name := path
	if len(path) >= 100 {
		dir, err := unix.Open(filepath.Dir(path), unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("open dir of %s: %w", path, err)
		}
		defer unix.Close(dir)
		name = fmt.Sprintf("/proc/self/fd/%d/%s", dir, filepath.Base(path))
	}
	return net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: name, Net: "unixpacket"})
}

// AttachConmon streams a container's stdio through conmon's attach socket until the container's
// output ends (it exited and conmon closed the socket) or ctx ends (the client went away).
func AttachConmon(ctx context.Context, o AttachOptions) error {
	conn, err := dialSeqpacket(o.Socket)
	if err != nil {
		return fmt.Errorf("attach socket: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	if o.Resize != nil && o.OnResize != nil {
		go func() {
			for size := range o.Resize {
				_ = o.OnResize(size)
			}
		}()
	}
	if o.Stdin != nil {
		go func() {
			_, _ = io.Copy(conn, o.Stdin)
			if o.CloseStdin {
				_ = conn.CloseWrite()
			}
		}()
	}

	var once sync.Once
	closeOut := func() {
		once.Do(func() {
			for _, w := range []io.WriteCloser{o.Stdout, o.Stderr} {
				if w != nil {
					w.Close()
				}
			}
		})
	}
	defer closeOut()
	buf := make([]byte, conmonPacket+1)
	for {
		n, err := conn.Read(buf)
		if n > 1 {
			var w io.Writer
			switch buf[0] {
			case conmonStdout:
				w = o.Stdout
			case conmonStderr:
				w = o.Stderr
			}
			if w != nil {
				if _, werr := w.Write(buf[1:n]); werr != nil {
					return nil // the client is gone
				}
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) || ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		if n == 0 {
			return nil // orderly shutdown of a seqpacket socket
		}
	}
}
