package testutil

import (
	"net"
	"strconv"
	"testing"
)

func TestFreePort(t *testing.T) {
	low, err := ephemeralLow()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for range 50 {
		p := FreePort(t)
		if p >= low || p < 10000 {
			t.Fatalf("port %d is not below the ephemeral range (%d)", p, low)
		}
		if seen[p] {
			t.Fatalf("port %d given twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d is not free: %v", p, err)
		}
		l.Close()
	}
}
