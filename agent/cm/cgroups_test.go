package cm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func i64(v int64) *int64   { return &v }
func u64(v uint64) *uint64 { return &v }

// fakeV1 is a cgroup v1 layout of plain folders: the library writes the same files there that it
// writes on the kernel's, which is what these tests check.
func fakeV1(t *testing.T) Cgroups {
	mount := t.TempDir()
	for _, s := range []string{"cpu", "memory", "pids", "hugetlb"} {
		if err := os.Mkdir(filepath.Join(mount, s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return Cgroups{Mount: mount}
}

// fakeV2 is a cgroup v2 root of plain files: the controllers get enabled in its subtree_control.
func fakeV2(t *testing.T) Cgroups {
	mount := t.TempDir()
	writeFiles(t, mount, map[string]string{"cgroup.subtree_control": "", "cgroup.controllers": "cpu memory pids hugetlb"})
	return Cgroups{Mount: mount, Unified: true}
}

func TestApplyV1(t *testing.T) {
	c := fakeV1(t)
	l := Limits{CPUShares: u64(3584), Memory: i64(6 << 30), Pids: i64(31768), HugePages: map[int64]int64{2 << 20: 64 << 20}}
	if err := c.Apply("/kubepods", l); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"cpu/kubepods/cpu.shares":                     "3584",
		"memory/kubepods/memory.limit_in_bytes":       fmt.Sprint(6 << 30),
		"pids/kubepods/pids.max":                      "31768",
		"hugetlb/kubepods/hugetlb.2MB.limit_in_bytes": fmt.Sprint(64 << 20),
	} {
		if got := readFile(t, filepath.Join(c.Mount, file)); got != want {
			t.Errorf("%s = %s, want %s", file, got, want)
		}
	}
	if !c.Exists("/kubepods") || c.Exists("/other") {
		t.Error("Exists")
	}
	for _, bad := range []string{"kubepods", "/", "/a/../../etc"} {
		if err := c.Apply(bad, l); err == nil {
			t.Errorf("%q: applied", bad)
		}
	}
}

func TestApplyV2(t *testing.T) {
	c := fakeV2(t)
	l := Limits{CPUShares: u64(1024), Memory: i64(1 << 30), Pids: i64(500), HugePages: map[int64]int64{2 << 20: 0}}
	if err := c.Apply("/kubepods", l); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"kubepods/cpu.weight":      "39",
		"kubepods/memory.max":      fmt.Sprint(1 << 30),
		"kubepods/pids.max":        "500",
		"kubepods/hugetlb.2MB.max": "0",
	} {
		if got := readFile(t, filepath.Join(c.Mount, file)); got != want {
			t.Errorf("%s = %s, want %s", file, got, want)
		}
	}
	if got := readFile(t, filepath.Join(c.Mount, "cgroup.subtree_control")); got != "+cpu +memory +pids +hugetlb" {
		t.Errorf("controllers enabled: %q", got)
	}
}

// A pod cgroup two levels down: the quota and period on both versions, pids "max" on v2 (v1 has no
// way back to unlimited and is left alone), the controllers enabled at every level above it, and a
// cgroup whose controllers cannot be enabled removed again.
func TestApplyNestedQuota(t *testing.T) {
	l := Limits{CPUShares: u64(2), CPUQuota: i64(50000), CPUPeriod: u64(100000), Memory: i64(64 << 20), Pids: i64(-1)}
	v1 := fakeV1(t)
	if err := v1.Apply("/kubepods/burstable/podx", l); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"cpu/kubepods/burstable/podx/cpu.shares":               "2",
		"cpu/kubepods/burstable/podx/cpu.cfs_quota_us":         "50000",
		"cpu/kubepods/burstable/podx/cpu.cfs_period_us":        "100000",
		"memory/kubepods/burstable/podx/memory.limit_in_bytes": fmt.Sprint(64 << 20),
	} {
		if got := readFile(t, filepath.Join(v1.Mount, file)); got != want {
			t.Errorf("v1 %s = %s, want %s", file, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(v1.Mount, "pids/kubepods/burstable/podx/pids.max")); err == nil {
		t.Error("v1 wrote pids.max for no limit")
	}

	v2 := fakeV2(t)
	writeFiles(t, v2.Mount, map[string]string{"kubepods/cgroup.subtree_control": "", "kubepods/burstable/cgroup.subtree_control": ""})
	if err := v2.Apply("/kubepods/burstable/podx", l); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		"kubepods/burstable/podx/cpu.weight":        "1",
		"kubepods/burstable/podx/cpu.max":           "50000 100000",
		"kubepods/burstable/podx/memory.max":        fmt.Sprint(64 << 20),
		"kubepods/burstable/podx/pids.max":          "max",
		"cgroup.subtree_control":                    "+cpu +memory +pids",
		"kubepods/cgroup.subtree_control":           "+cpu +memory +pids",
		"kubepods/burstable/cgroup.subtree_control": "+cpu +memory +pids",
	} {
		if got := readFile(t, filepath.Join(v2.Mount, file)); got != want {
			t.Errorf("v2 %s = %q, want %q", file, got, want)
		}
	}
	if err := v2.Apply("/kubepods/burstable/pody", Limits{CPUQuota: i64(-1)}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(v2.Mount, "kubepods/burstable/pody/cpu.max")); got != "max 100000" {
		t.Errorf("no quota: cpu.max = %q", got)
	}

	// No subtree_control in the parent: a cgroup2 mount would always have one.
	if err := v2.Apply("/other/pod", l); err == nil {
		t.Error("applied without enabling the controllers")
	}
	if _, err := os.Stat(filepath.Join(v2.Mount, "other/pod")); err == nil {
		t.Error("the cgroup made for a failed Apply is left")
	}
}

type recorded struct{ typ, reason, msg string }

type recorder struct {
	mu  sync.Mutex
	evs []recorded
}

func (r *recorder) Eventf(_ runtime.Object, typ, reason, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, recorded{typ, reason, fmt.Sprintf(format, args...)})
}

func (r *recorder) reasons() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.evs {
		out = append(out, e.reason)
	}
	return out
}

func TestManagerEnforces(t *testing.T) {
	c := fakeV1(t)
	rec := &recorder{}
	cfg := Config{MaxPods: 110, RootDir: t.TempDir(), PodsCgroup: "/kubepods",
		SystemReserved: rl("cpu", "500m", "memory", "1Gi", "pid", "1000"), KubeReserved: rl("cpu", "500m"),
		HardEvictionThresholds: hard(t, map[string]string{"memory.available": "100Mi"}),
		EnforceNodeAllocatable: []string{"pods", "system-reserved", "kube-reserved-compressible"},
		SystemReservedCgroup:   "/system.slice", KubeReservedCgroup: "/kube.slice"}
	deps := Deps{Machine: fakeMachine(t), Cgroups: &c, Recorder: rec, Node: &v1.ObjectReference{Kind: "Node", Name: "n"}}

	_, err := New(cfg, deps)
	if err == nil || !strings.Contains(err.Error(), "system-reserved: cgroup /system.slice does not exist") {
		t.Fatalf("missing reserved cgroup: %v", err)
	}
	for _, s := range []string{"cpu", "memory", "pids", "hugetlb"} {
		for _, cg := range []string{"system.slice", "kube.slice"} {
			if err := os.Mkdir(filepath.Join(c.Mount, s, cg), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	m, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	capacity, alloc := m.Resources()
	if want := rl("cpu", "3", "memory", "6044Mi", "pods", "110", "hugepages-2Mi", "1Gi", "hugepages-1Gi", "0"); !same(withoutStorage(alloc), want) {
		t.Errorf("allocatable %s, want %s (capacity %s)", show(alloc), show(want), show(capacity))
	}
	m.Run(context.Background())
	for file, want := range map[string]string{
		// 4 CPUs less 1 reserved; 8Gi less 1Gi (eviction is not in the cgroup); 63000 pids less 1000.
		"cpu/kubepods/cpu.shares":                     "3072",
		"memory/kubepods/memory.limit_in_bytes":       fmt.Sprint(7 << 30),
		"pids/kubepods/pids.max":                      "62000",
		"hugetlb/kubepods/hugetlb.2MB.limit_in_bytes": fmt.Sprint(1 << 30),
		"cpu/system.slice/cpu.shares":                 "512",
		"memory/system.slice/memory.limit_in_bytes":   fmt.Sprint(1 << 30),
		"pids/system.slice/pids.max":                  "1000",
		"cpu/kube.slice/cpu.shares":                   "512",
	} {
		if got := readFile(t, filepath.Join(c.Mount, file)); got != want {
			t.Errorf("%s = %s, want %s", file, got, want)
		}
	}
	if _, err := os.Stat(filepath.Join(c.Mount, "memory/kube.slice/memory.limit_in_bytes")); err == nil {
		t.Error("kube-reserved-compressible wrote a memory limit")
	}
	if got := rec.reasons(); len(got) != 1 || got[0] != EventEnforced {
		t.Errorf("events %v", got)
	}
}

func withoutStorage(l v1.ResourceList) v1.ResourceList {
	l = l.DeepCopy()
	delete(l, v1.ResourceEphemeralStorage)
	return l
}

func TestManagerRetriesAFailedEnforcement(t *testing.T) {
	c := fakeV1(t)
	// A file where the cgroup folder should be: every write fails until it is gone.
	blocker := filepath.Join(c.Mount, "cpu", "kubepods")
	writeFiles(t, c.Mount, map[string]string{"cpu/kubepods": ""})
	rec := &recorder{}
	m, err := New(Config{MaxPods: 10, PodsCgroup: "/kubepods", EnforceNodeAllocatable: []string{"pods"}},
		Deps{Machine: fakeMachine(t), Cgroups: &c, Recorder: rec, Node: &v1.ObjectReference{Kind: "Node", Name: "n"}, RetryPeriod: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { m.Run(context.Background()); close(done) }()
	// The minutes only guard against a hang: the failure and the retry are awaited, not timed.
	deadline := time.Now().Add(time.Minute)
	for len(rec.reasons()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the failed enforcement was never reported")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("enforcement not retried")
	}
	got := rec.reasons()
	if got[0] != EventFailed || got[len(got)-1] != EventEnforced {
		t.Errorf("events %v: want failures then %s", got, EventEnforced)
	}
	if readFile(t, filepath.Join(c.Mount, "cpu/kubepods/cpu.shares")) != "4096" {
		t.Error("shares not written after the retry")
	}
}

func TestManagerRefusesReservationsBeyondCapacity(t *testing.T) {
	c := fakeV1(t)
	_, err := New(Config{MaxPods: 10, SystemReserved: rl("memory", "8Gi"), HardEvictionThresholds: hard(t, map[string]string{"memory.available": "100Mi"})},
		Deps{Machine: fakeMachine(t), Cgroups: &c})
	if err == nil || !strings.Contains(err.Error(), "memory: reserved") {
		t.Errorf("err %v", err)
	}
}

func TestPodsPerCore(t *testing.T) {
	c := fakeV1(t)
	for _, tc := range []struct{ maxPods, perCore, want int }{{110, 0, 110}, {110, 10, 40}, {20, 10, 20}} {
		m, err := New(Config{MaxPods: tc.maxPods, PodsPerCore: tc.perCore}, Deps{Machine: fakeMachine(t), Cgroups: &c})
		if err != nil {
			t.Fatal(err)
		}
		capacity, alloc := m.Resources()
		if p, a := capacity[v1.ResourcePods], alloc[v1.ResourcePods]; p.Value() != int64(tc.want) || a.Value() != int64(tc.want) {
			t.Errorf("maxPods %d podsPerCore %d on 4 CPUs: pods %s/%s, want %d", tc.maxPods, tc.perCore, p.String(), a.String(), tc.want)
		}
	}
}
