package agent

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAgentNeverImportsRuntime keeps the one rule of the architecture: the agent knows containers
// only through CRI, so it works unchanged against containerd or CRI-O.
func TestAgentNeverImportsRuntime(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-test", "github.com/nodelet/nodelet/agent/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/nodelet/nodelet/runtime/") || pkg == "github.com/nodelet/nodelet/runtime" {
			t.Errorf("an agent package depends on %s; the agent may reach the runtime only through CRI", pkg)
		}
	}
}
