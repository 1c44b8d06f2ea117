// Package e2e drives the nodelet binary as users do — as a daemon, through crictl — with the real
// runc, conmon and CNI plugins, and images from an in-process registry.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nodelet/nodelet/runtime/cni"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// nodeletBin is built once for the package's tests.
var nodeletBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nodelet-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	nodeletBin = filepath.Join(dir, "nodelet")
	build := exec.Command("go", "build", "-o", nodeletBin, "github.com/nodelet/nodelet/cmd/nodelet")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building nodelet:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// daemon is a `nodelet runtime` started by a test, with every path of its own.
type daemon struct {
	root, state, endpoint string
	bridge                string
	cgroupRoot            string // the agent's pod cgroups (up only)
	cmd                   *exec.Cmd
	log                   *os.File
}

// startRuntime starts `nodelet runtime` with a private CNI network (its own bridge and subnet, so it
// never meets another runtime's pods) and the extra flags given.
func startRuntime(t *testing.T, bridge, subnet string, extra ...string) *daemon {
	t.Helper()
	return startDaemon(t, "runtime", bridge, subnet, extra...)
}

// startDaemon starts `nodelet VERB` (runtime or up) the same way.
func startDaemon(t *testing.T, verb, bridge, subnet string, extra ...string) *daemon {
	t.Helper()
	testutil.Require(t, "runc", "conmon", "cni:bridge", "cni:host-local", "cni:portmap", "iptables")
	base := t.TempDir()
	d := &daemon{
		root:   filepath.Join(base, "root"),
		state:  filepath.Join(base, "state"),
		bridge: bridge,
	}
	d.endpoint = "unix://" + filepath.Join(d.state, "rt.sock")
	confDir := filepath.Join(base, "cni")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	net := cni.DefaultNetwork{Name: "e2e-" + bridge, Bridge: bridge, Subnet: subnet, DataDir: filepath.Join(base, "ipam")}
	if err := os.WriteFile(filepath.Join(confDir, "10-e2e.conflist"), net.ConfList(), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.CheckNoLeaks(t, base)
	var err error
	if d.log, err = os.Create(filepath.Join(base, "daemon.log")); err != nil {
		t.Fatal(err)
	}
	args := []string{verb, "--root", d.root, "--state", d.state, "--listen", d.endpoint,
		"--cni-conf-dir", confDir, "--log-level", "debug"}
	// Sandboxes that name no cgroup parent (crictl's) go under one of the test's own, not the
	// runtime's default /nodelet, so that the test can remove it and check it did.
	cgroupParent := fmt.Sprintf("/nodelet-e2e-%s-%d-%s", verb, os.Getpid(), bridge)
	args = append(args, "--cgroup-parent", cgroupParent)
	var cgroupRoot string
	if verb == "up" {
		// The agent owns its cgroup root: it removes pod cgroups there that no pod of its own and
		// no sandbox of its runtime explains, so no two agents may share one.
		cgroupRoot = fmt.Sprintf("/nodelet-e2e-up-root-%d-%s", os.Getpid(), bridge)
		args = append(args, "--cgroup-root", cgroupRoot)
		d.cgroupRoot = cgroupRoot
	}
	args = append(args, extra...)
	d.cmd = exec.Command(nodeletBin, args...)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.removeAllPods()
		d.stop(t)
		exec.Command("ip", "link", "del", bridge).Run()
		testutil.RemoveCgroupRootOrFail(t, cgroupParent)
		if cgroupRoot != "" {
			testutil.RemoveCgroupRootOrFail(t, cgroupRoot)
		}
		if t.Failed() {
			b, _ := os.ReadFile(d.log.Name())
			t.Logf("daemon log:\n%s", b)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(strings.TrimPrefix(d.endpoint, "unix://")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("runtime did not create its socket")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return d
}

// stop ends the daemon with SIGTERM; containers it left would be found by the leak check.
func (d *daemon) stop(t *testing.T) {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		d.cmd.Process.Kill()
		<-done
	}
	d.cmd = nil
}

// removeAllPods takes down whatever a failed test left running, so the leak check speaks of the
// daemon's cleanup rather than of the test's early exit.
func (d *daemon) removeAllPods() {
	out, err := d.crictlErr("pods", "-q")
	if err != nil {
		return
	}
	for _, id := range strings.Fields(out) {
		d.crictlErr("stopp", id)
		d.crictlErr("rmp", id)
	}
}

// crictl runs crictl against the daemon and returns its stdout, failing the test on error.
func (d *daemon) crictl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := d.crictlErr(args...)
	if err != nil {
		t.Fatalf("crictl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (d *daemon) crictlErr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := filepath.Join(filepath.Dir(d.root), "crictl.yaml")
	if _, err := os.Stat(cfg); err != nil {
		os.WriteFile(cfg, []byte("timeout: 60\n"), 0o644)
	}
	full := append([]string{"--config", cfg, "--runtime-endpoint", d.endpoint, "--image-endpoint", d.endpoint}, args...)
	cmd := exec.CommandContext(ctx, testutil.LookPath("crictl"), full...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}
