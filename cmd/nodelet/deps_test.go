package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoTestHarness keeps fakes, test registries and leak checkers out of the shipped binary:
// they live under test/ and only tests may import them.
func TestLinksNoTestHarness(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/nodelet/nodelet/cmd/nodelet").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/nodelet/nodelet/test/") || strings.Contains(pkg, "/fake") {
			t.Errorf("cmd/nodelet links %s, a test harness", pkg)
		}
	}
}
