package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// startChildAgent runs the agent as a process of its own (this test binary in agent mode), so the
// test can SIGKILL it like an operator or the OOM killer would.
func (e *env) startChildAgent() *exec.Cmd {
	e.t.Helper()
	js, _ := json.Marshal(e.cfg)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childAgentEnv+"="+string(js))
	logf, err := os.OpenFile(filepath.Join(filepath.Dir(e.manifests), "agent.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	return cmd
}

func sigkillScenario(t *testing.T, e *env) {
	e.writePod("a", "Always", e.reg+"/busybox:1", loop)
	e.writePod("b", "Always", e.reg+"/busybox:1", loop)
	first := e.startChildAgent()
	e.eventually("two pods running", func() bool { return e.countRunning() == 2 })
	ids := func() []string {
		var out []string
		for _, n := range []string{"a", "b"} {
			for _, c := range e.containers(n) {
				out = append(out, c.Id)
			}
			for _, s := range e.sandboxes(n) {
				out = append(out, s.Id)
			}
		}
		slices.Sort(out)
		return out
	}
	before := ids()
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	if got := ids(); !slices.Equal(got, before) {
		t.Fatalf("the runtime changed when the agent died: %v → %v", before, got)
	}
	e.startChildAgent()
	time.Sleep(5 * time.Second) // several syncs, relists and housekeeping passes
	if got := ids(); !slices.Equal(got, before) || e.countRunning() != 2 {
		t.Fatalf("after the agent came back: containers and sandboxes %v, want %v unchanged and running", got, before)
	}
	// The new agent still owns them: deleting a manifest removes its pod.
	os.Remove(filepath.Join(e.manifests, "b.yaml"))
	e.eventually("b removed by the new agent", func() bool { return len(e.sandboxes("b")) == 0 && e.countRunning() == 1 })
}

func TestAgentSIGKILLOnNodeletRuntime(t *testing.T) {
	sigkillScenario(t, newEnv(t, onNodelet))
}

func TestAgentSIGKILLOnContainerd(t *testing.T) {
	sigkillScenario(t, newEnv(t, onContainerd))
}
