package server_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/agent/server"
	"github.com/nodelet/nodelet/test/harness/apitest"
)

// hangGuard bounds a read that must end on its own, so a regression fails instead of hanging.
const hangGuard = 30 * time.Second

func serveWithLimits(t *testing.T, l server.Limits) string {
	t.Helper()
	f := apitest.NewFixture(t)
	f.AddPod("default", "web", "app")
	s := server.New(server.Deps{NodeName: "node1", Pods: f.Pods, Runtime: f.Runtime, Limits: l})
	return f.ServeUnix(t, s)
}

func TestIdleKeepAliveConnectionIsClosed(t *testing.T) {
	sock := serveWithLimits(t, server.Limits{IdleTimeout: 50 * time.Millisecond})
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(hangGuard))
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: agent\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("healthz: %d, close %v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
	// Nothing more is sent: the server must hang up by itself.
	if n, err := br.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: read %d bytes, err %v; want the server to close it", n, err)
	}
}

func TestOversizedBodyIsRefused(t *testing.T) {
	const limit = 1 << 10
	sock := serveWithLimits(t, server.Limits{MaxBodyBytes: limit})
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
	tests := []struct {
		name, method, path string
		size               int
		want               int
	}{
		{name: "exec without upgrade", method: http.MethodPost, path: "/exec/default/web/app?command=sh&stdin=1", size: 4 * limit, want: http.StatusRequestEntityTooLarge},
		{name: "any route", method: http.MethodPost, path: "/pods", size: 4 * limit, want: http.StatusRequestEntityTooLarge},
		{name: "small body passes the limit", method: http.MethodPost, path: "/pods", size: limit / 2, want: http.StatusMethodNotAllowed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, "http://agent"+tc.path, bytes.NewReader(bytes.Repeat([]byte("x"), tc.size)))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("%s %s with %d bytes: %d %q, want %d", tc.method, tc.path, tc.size, resp.StatusCode, strings.TrimSpace(string(b)), tc.want)
			}
		})
	}
}
