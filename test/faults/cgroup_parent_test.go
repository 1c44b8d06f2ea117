package faults

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestSharedCgroupParentRemoved: two pods under a parent cgroup neither names as its own (the
// agent's QoS cgroup, <root>/besteffort), the pod that made it removed first. Once both are gone
// the parent must be too, as it is when a single pod comes and goes; otherwise every removal
// order but one leaves it, and no later pod removes it.
func TestSharedCgroupParentRemoved(t *testing.T) {
	d := newDaemon(t, "runtime", "nlfault3", "10.254.33.0/24")
	d.start()
	d.pull()
	base := d.baseline(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(name string) string {
		cfg := &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "faults", Uid: name},
			Linux: &runtimeapi.LinuxPodSandboxConfig{CgroupParent: filepath.Join(d.cgroup, "besteffort", "pod"+name),
				SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
					NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}},
		}
		r, err := d.rs.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
		if err != nil {
			t.Fatalf("run %s: %v", name, err)
		}
		return r.PodSandboxId
	}
	remove := func(id string) {
		if _, err := d.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Fatalf("stop %s: %v", id, err)
		}
		if _, err := d.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Fatalf("remove %s: %v", id, err)
		}
	}
	first := run("first") // makes besteffort
	second := run("second")
	remove(first)
	remove(second)
	if _, leaks := d.waitNoLeaks(base); len(leaks) > 0 {
		for _, s := range leaks {
			t.Error(s)
		}
	}
}
