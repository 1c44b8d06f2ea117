package cni

import (
	"os"
	"path/filepath"
	"testing"
)

// A sandbox whose record a crash lost still holds its IP, veth and cache entry; the sweep at
// start releases them and leaves the networks of sandboxes that exist alone.
func TestSweepOrphansReleasesLostSandboxes(t *testing.T) {
	tn := newTestNet(t)
	ctx := ctxT(t)
	var pods []PodNetwork
	for _, name := range []string{"kept", "lost"} {
		p := tn.pod(t, name)
		if _, err := tn.Manager.SetUpPod(ctx, p); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	kept, lost := pods[0], pods[1]
	// The lost sandbox's namespace went with it.
	removeNetNS(t, lost.NetNSPath)
	// A crash between writing a pending mark and renaming it left its temporary file.
	half := filepath.Join(tn.Manager.opts.StateDir, "pending", "half-written.json.tmp")
	if err := os.WriteFile(half, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := tn.Manager.SweepOrphans(ctx, func(id string) bool { return id == kept.SandboxID }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(half); !os.IsNotExist(err) {
		t.Errorf("a half-written pending mark survived the sweep: %v", err)
	}
	if ips := tn.allocated(t); len(ips) != 1 {
		t.Fatalf("after the sweep %d IPs are allocated, want the kept sandbox's only: %v", len(ips), ips)
	}
	if atts, _ := tn.Manager.cni.GetCachedAttachments(lost.SandboxID); len(atts) != 0 {
		t.Errorf("the lost sandbox is still in libcni's cache")
	}
	if atts, _ := tn.Manager.cni.GetCachedAttachments(kept.SandboxID); len(atts) != 1 {
		t.Errorf("the kept sandbox lost its cache entry")
	}
	if err := tn.Manager.TearDownPod(ctx, kept); err != nil {
		t.Fatal(err)
	}
	tn.assertNoLeaks(t, kept.SandboxID, lost.SandboxID)
}
