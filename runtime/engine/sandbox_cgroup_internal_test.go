package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// A parent the client made in some hierarchies only (the agent makes its QoS cgroups where it
// writes limits) is the client's: a pod below it neither lists it as made nor takes it away when
// the pod goes, while a parent absent everywhere is the runtime's and goes with its last pod.
func TestClientsPartialParentIsNeverTheRuntimes(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatalf("writing cgroups needs root: run the test as root (%s)", testutil.InstallHint)
	}
	roots, err := cgroupRoots()
	if err != nil || len(roots) < 2 {
		t.Fatalf("cgroup roots: %v %v (the test needs two hierarchies, as cgroup v1 has)", roots, err)
	}
	top := fmt.Sprintf("/nodelet-parenttest-%d", os.Getpid())
	t.Cleanup(func() {
		for _, r := range roots {
			for _, d := range []string{"client/pod", "client", "runtime/pod", "runtime", ""} {
				os.Remove(filepath.Join(r.Path, top, d))
			}
			if _, err := os.Stat(filepath.Join(r.Path, top)); err == nil {
				t.Errorf("cgroup %s left behind", filepath.Join(r.Path, top))
			}
		}
	})
	for _, r := range roots {
		if err := os.MkdirAll(filepath.Join(r.Path, top), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := initCgroupDir(r, r.Path, filepath.Join(r.Path, top)); err != nil {
			t.Fatal(err)
		}
	}
	clientsRoot := roots[0]
	if clientsRoot.Cpuset {
		clientsRoot = roots[1]
	}
	if err := os.Mkdir(filepath.Join(clientsRoot.Path, top, "client"), 0o755); err != nil {
		t.Fatal(err)
	}

	client, runtime := top+"/client/pod", top+"/runtime/pod"
	if got, _ := missingCgroups(client, top); !slices.Equal(got, []string{client}) {
		t.Errorf("below the client's parent: made %q, want only the pod's own %q", got, client)
	}
	if got, _ := missingCgroups(runtime, top); !slices.Equal(got, []string{top + "/runtime", runtime}) {
		t.Errorf("below no parent: made %q, want the parent and the pod's own", got)
	}

	m := &madeCgroups{file: filepath.Join(t.TempDir(), "made"), set: map[string]bool{}}
	for _, pod := range []string{client, runtime} {
		created, err := missingCgroups(pod, top)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.create(pod, top); err != nil {
			t.Fatal(err)
		}
		if err := removeCgroups(created, pod); err != nil {
			t.Fatal(err)
		}
		if err := m.release(pod, top); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(clientsRoot.Path, top, "client")); err != nil {
		t.Errorf("the client's parent went with the pod below it: %v", err)
	}
	for _, r := range roots {
		for _, d := range []string{client, runtime, top + "/runtime"} {
			if _, err := os.Stat(filepath.Join(r.Path, d)); err == nil {
				t.Errorf("%s stayed after its pod went", filepath.Join(r.Path, d))
			}
		}
	}
}
