package qos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/cm"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// The QoS and pod cgroups on this host's kernel, under a cgroup root of the test's own; a process
// left in a gone pod's cgroup is killed and the cgroup removed; the root is removed after and
// checked to be gone.
func TestHostQoSAndPodCgroups(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatalf("writing cgroups needs root: run the test as root (%s)", testutil.InstallHint)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("sleep: %v (apt-get install coreutils)", err)
	}
	c := cm.HostCgroups()
	b := make([]byte, 4)
	rand.Read(b)
	top := "/nodelet-test-" + hex.EncodeToString(b)
	t.Cleanup(func() {
		dirs := c.Dirs(top)
		for _, d := range dirs {
			testutil.RemoveCgroupTree(d)
		}
		for _, d := range dirs {
			if _, err := os.Stat(d); err == nil {
				t.Errorf("cgroup %s left behind", d)
			}
		}
	})
	root := top + "/kubepods"
	p := pod("b1", ctr{res("cpu", "250m", "memory", "64Mi"), res("cpu", "500m", "memory", "128Mi")})
	active := &podSet{}
	active.set(p)
	m := New(Config{Root: root, PodPidsLimit: 50}, Deps{Cgroups: &c, ActivePods: active.get,
		RuntimePods: func(context.Context) (map[types.UID]bool, error) { return nil, nil }})
	if err := m.EnsurePod(p); err != nil {
		t.Fatal(err)
	}
	podCg := PodCgroup(root, p)
	read := func(sub, name, file string) string {
		if c.Unified {
			return readFile(t, filepath.Join(c.Mount, name, file))
		}
		return readFile(t, filepath.Join(c.Mount, sub, name, file))
	}
	if c.Unified {
		for file, want := range map[string]string{"cpu.max": "50000 100000", "memory.max": fmt.Sprint(128 << 20), "pids.max": "50",
			"cpu.weight": fmt.Sprint(cm.SharesToWeight(256))} {
			if got := read("", podCg, file); got != want {
				t.Errorf("pod %s = %s, want %s", file, got, want)
			}
		}
	} else {
		for _, f := range []struct{ sub, name, file, want string }{
			{"cpu", root + "/burstable", "cpu.shares", "256"},
			{"cpu", root + "/besteffort", "cpu.shares", "2"},
			{"cpu", podCg, "cpu.shares", "256"},
			{"cpu", podCg, "cpu.cfs_quota_us", "50000"},
			{"memory", podCg, "memory.limit_in_bytes", fmt.Sprint(128 << 20)},
			{"pids", podCg, "pids.max", "50"},
		} {
			if got := read(f.sub, f.name, f.file); got != f.want {
				t.Errorf("%s %s %s = %s, want %s", f.sub, f.name, f.file, got, f.want)
			}
		}
	}

	// The pod is gone but a process stayed in its cgroup.
	cmd := exec.Command(sleep, "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	for _, d := range c.Dirs(podCg) {
		if _, err := os.Stat(d); err != nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
			t.Fatalf("move the process into %s: %v", d, err)
		}
	}
	active.set()
	if err := m.CleanupOrphans(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The minute only guards against a hang: the kill and the removal are awaited, not timed.
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("the process in the orphaned pod cgroup was not killed")
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if err := m.CleanupOrphans(context.Background()); err != nil {
			t.Fatal(err)
		}
		left := 0
		for _, d := range c.Dirs(podCg) {
			if _, err := os.Stat(d); err == nil {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphaned pod cgroup %s still in %d hierarchies", podCg, left)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The QoS cgroups are no pods' and stay; the gone pod's request leaves the burstable shares.
	if err := m.UpdateQoS(); err != nil {
		t.Fatal(err)
	}
	if !c.Unified {
		if got := read("cpu", root+"/burstable", "cpu.shares"); got != "2" {
			t.Errorf("burstable shares after the pod left: %s", got)
		}
	}
}
