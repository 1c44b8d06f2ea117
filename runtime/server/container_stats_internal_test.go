package server

import (
	"os"
	"testing"
)

// TestStatsNetworkUsage reads this process's own namespace, which has at least one interface
// besides loopback on any machine that runs these tests.
func TestStatsNetworkUsage(t *testing.T) {
	nu := networkUsage(os.Getpid(), 1)
	if nu == nil || nu.DefaultInterface == nil || nu.DefaultInterface.Name == "" || nu.DefaultInterface.RxBytes == nil {
		t.Fatalf("network usage: %v", nu)
	}
	for _, i := range nu.Interfaces {
		if i.Name == "lo" {
			t.Fatal("loopback counted")
		}
	}
	if networkUsage(-1, 1) != nil {
		t.Fatal("usage for no process")
	}
}
