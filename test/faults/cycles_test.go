package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// cycle takes one pod through its whole life: a sandbox with a network namespace of its own, a
// container started in it, an exec, then stop and remove. It fails the test on any error.
func (d *daemon) cycle(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "faults", Uid: name},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD}}},
	}
	sb, err := d.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatalf("%s: run sandbox: %v", name, err)
	}
	c, err := d.rs.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: cfg,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
			Image: &runtimeapi.ImageSpec{Image: image}, Command: []string{"sleep", "3600"}}})
	if err != nil {
		t.Fatalf("%s: create container: %v", name, err)
	}
	if _, err := d.rs.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		t.Fatalf("%s: start container: %v", name, err)
	}
	ex, err := d.rs.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: c.ContainerId, Cmd: []string{"echo", name}, Timeout: 60})
	if err != nil || ex.ExitCode != 0 || strings.TrimSpace(string(ex.Stdout)) != name {
		t.Fatalf("%s: exec: %v, exit %d, stdout %q stderr %q", name, err, ex.GetExitCode(), ex.GetStdout(), ex.GetStderr())
	}
	if _, err := d.rs.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.ContainerId, Timeout: 0}); err != nil {
		t.Fatalf("%s: stop container: %v", name, err)
	}
	if _, err := d.rs.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: c.ContainerId}); err != nil {
		t.Fatalf("%s: remove container: %v", name, err)
	}
	if _, err := d.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
		t.Fatalf("%s: stop sandbox: %v", name, err)
	}
	if _, err := d.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId}); err != nil {
		t.Fatalf("%s: remove sandbox: %v", name, err)
	}
}

// baseline is what the daemon holds after one whole pod cycle: the dirs a runtime makes on first
// use (its CNI cache, its OCI runtime's root) belong to it, not to any pod.
func (d *daemon) baseline(t *testing.T) holdings {
	t.Helper()
	d.cycle(t, "warm-up")
	return d.settled(t)
}

// settled waits until no pod holds anything (its conmon may take a moment to exit) and returns
// what the daemon holds then; the limit guards a hang only.
func (d *daemon) settled(t *testing.T) holdings {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		h := d.holdings()
		if len(h.Procs)+len(h.Mounts)+len(h.IPs)+len(h.Veths) == 0 {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods gone, yet: %s", h.leaksSince(holdings{}))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// maxRSSGrowth bounds the daemon's memory growth over the leak test: generous, since the Go heap
// grows in steps and is returned lazily; a per-pod leak over many cycles passes it.
func maxRSSGrowth(base int64) int64 { return base + 128<<20 }

// TestPodCycleLeaks runs NODELET_LEAK_CYCLES pods, one after the other, through their whole life
// against `nodelet runtime` and prints what the daemon holds every 100 cycles. Whatever pods
// hold must return to the baseline; memory is printed, and held only to a generous bound.
func TestPodCycleLeaks(t *testing.T) {
	cycles := envInt(t, "NODELET_LEAK_CYCLES", 40)
	d := newDaemon(t, "runtime", "nlfault2", "10.254.32.0/24")
	d.start()
	d.pull()
	base := d.baseline(t)
	t.Logf("baseline: %s", base)
	start := time.Now()
	for i := 1; i <= cycles; i++ {
		d.cycle(t, fmt.Sprintf("cycle-%d", i))
		if i%100 == 0 || i == cycles {
			now := d.holdings()
			t.Logf("after %d cycles (%s): %s", i, time.Since(start).Round(time.Millisecond), now)
		}
	}
	now, leaks := d.waitNoLeaks(base)
	t.Logf("SUMMARY leak test: %d pod cycles in %s; daemon rss %.1f → %.1f MiB, fds %d → %d, threads %d → %d; leaks: %d",
		cycles, time.Since(start).Round(time.Millisecond), float64(base.RSS)/(1<<20), float64(now.RSS)/(1<<20),
		base.FDs, now.FDs, base.Threads, now.Threads, len(leaks))
	for _, s := range leaks {
		t.Error(s)
	}
	if now.RSS > maxRSSGrowth(base.RSS) {
		t.Errorf("daemon rss grew from %d to %d bytes over %d cycles (bound %d)", base.RSS, now.RSS, cycles, maxRSSGrowth(base.RSS))
	}
}
