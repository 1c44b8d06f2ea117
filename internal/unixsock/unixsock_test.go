package unixsock

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLongPaths(t *testing.T) {
	for _, depth := range []int{0, 8} {
		dir := t.TempDir()
		for range depth {
			dir = filepath.Join(dir, strings.Repeat("d", 20))
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "server.sock")
		l, err := Listen(path)
		if err != nil {
			t.Fatalf("listen on a %d-byte path: %v", len(path), err)
		}
		go func() {
			c, err := l.Accept()
			if err == nil {
				c.Write([]byte("hi"))
				c.Close()
			}
		}()
		c, err := Dial(context.Background(), path)
		if err != nil {
			t.Fatalf("dial a %d-byte path: %v", len(path), err)
		}
		b, _ := io.ReadAll(c)
		c.Close()
		l.Close()
		if string(b) != "hi" {
			t.Errorf("read %q", b)
		}
		if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != os.ModeSocket {
			t.Errorf("the socket at %s: %v %v (Close must leave it to the caller)", path, fi, err)
		}
		os.Remove(path)
	}
}
