package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

// A sandbox removes the cgroups it made: its pod's always, an ancestor only when no other pod's
// cgroup is below it (then with one try: the kubelet's QoS cgroups stay busy as long as pods run).
func TestRemoveCgroupsKeepsBusyAncestors(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatalf("writing cgroups needs root: run the test as root (%s)", testutil.InstallHint)
	}
	roots, err := cgroupRoots()
	if err != nil || len(roots) == 0 {
		t.Fatalf("cgroup roots: %v %v", roots, err)
	}
	top := fmt.Sprintf("/nodelet-rmtest-%d", os.Getpid())
	t.Cleanup(func() {
		for _, r := range roots {
			for _, d := range []string{"busy/other", "busy/pod", "busy", "idle/pod", "idle", ""} {
				os.Remove(filepath.Join(r.Path, top, d))
			}
			if _, err := os.Stat(filepath.Join(r.Path, top)); err == nil {
				t.Errorf("cgroup %s left behind", filepath.Join(r.Path, top))
			}
		}
	})
	for _, r := range roots {
		for _, d := range []string{"busy/other", "busy/pod", "idle/pod"} {
			if err := os.MkdirAll(filepath.Join(r.Path, top, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	busy, idle := top+"/busy", top+"/idle"
	if err := removeCgroups([]string{busy, busy + "/pod"}, busy+"/pod"); err != nil {
		t.Fatalf("busy ancestor: %v", err)
	}
	if err := removeCgroups([]string{idle, idle + "/pod"}, idle+"/pod"); err != nil {
		t.Fatalf("idle ancestor: %v", err)
	}
	for _, r := range roots {
		for d, want := range map[string]bool{busy + "/pod": false, busy: true, idle + "/pod": false, idle: false} {
			_, err := os.Stat(filepath.Join(r.Path, d))
			if got := err == nil; got != want {
				t.Errorf("%s exists: %v, want %v", filepath.Join(r.Path, d), got, want)
			}
		}
	}
}
