package streaming

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// pipeStream is one forwarded connection as the streaming library hands it over.
type pipeStream struct {
	io.Reader
	io.Writer
	closeW func() error
}

func (p pipeStream) Close() error { return p.closeW() }

// TestPortForwardHostNetwork: a host-network pod has no namespace of its own; its ports are the
// host's loopback. A closed port is an error, not a hang.
func TestPortForwardHostNetwork(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c)
		fmt.Fprintf(c, "host got %s", b)
	}()
	port := int32(ln.Addr().(*net.TCPAddr).Port)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- PortForwardInNetNS(ctx, "", port, pipeStream{inR, outW, outW.Close}) }()
	io.WriteString(inW, "ping")
	inW.Close()
	got, _ := io.ReadAll(outR)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if string(got) != "host got ping" {
		t.Fatalf("got %q", got)
	}

	ln.Close()
	_, w := io.Pipe()
	err = PortForwardInNetNS(ctx, "", port, pipeStream{strings.NewReader(""), w, w.Close})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprint(port)) {
		t.Fatalf("forward to a closed port: %v", err)
	}
}
