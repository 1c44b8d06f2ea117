package streaming

import (
	"errors"
	"testing"
)

func TestPlainServerStaysOnLoopback(t *testing.T) {
	tests := []struct {
		name, addr string
		want       error // nil: starts plain
	}{
		{name: "default", addr: ""},
		{name: "ipv4 loopback", addr: "127.0.0.1:0"},
		{name: "other ipv4 loopback", addr: "127.0.0.2:0"},
		{name: "ipv6 loopback", addr: "[::1]:0"},
		{name: "localhost", addr: "localhost:0"},
		{name: "all interfaces", addr: ":0", want: ErrPlainNonLoopback},
		{name: "ipv4 any", addr: "0.0.0.0:0", want: ErrPlainNonLoopback},
		{name: "ipv6 any", addr: "[::]:0", want: ErrPlainNonLoopback},
		{name: "host name", addr: "node.example:0", want: ErrPlainNonLoopback},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(Config{Addr: tt.addr}, &fakeRuntime{})
			if err == nil {
				s.Close()
			}
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("New(%q) = %v, want %v", tt.addr, err, tt.want)
			}
		})
	}
}
