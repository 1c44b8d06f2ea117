package agent

import (
	"context"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/cm"
)

const burstable = `apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox:1
    imagePullPolicy: IfNotPresent
    resources:
      requests: {cpu: 300m, memory: 64Mi}
      limits: {memory: 128Mi}
`

// The agent keeps the pods' cgroups itself: the kubepods cgroup capped, the QoS tiers' shares
// following the pods, each pod's cgroup with its limits before its sandbox (here on a tree of plain
// folders standing in for the cgroup v1 hierarchies).
func TestAgentKeepsThePodsCgroups(t *testing.T) {
	h := newHarness(t)
	mount := t.TempDir()
	for _, s := range []string{"cpu", "memory", "pids", "hugetlb"} {
		if err := os.Mkdir(filepath.Join(mount, s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h.cfg.PodsCgroup = "/kubepods"
	h.cfg.Kubelet.SystemReserved = map[string]string{"cpu": "100m"}
	h.cfg.Kubelet.PodPidsLimit = new(int64(200))
	h.start(Deps{Cgroups: &cm.Cgroups{Mount: mount}})
	read := func(p string) string {
		b, _ := os.ReadFile(filepath.Join(mount, p))
		return strings.TrimSpace(string(b))
	}
	h.write("web.yaml", strings.ReplaceAll(burstable, "%s", "web"))
	h.eventually("web running", func() bool { return len(h.running()) == 1 })
	uid := h.running()[0].Labels["io.kubernetes.pod.uid"]
	pod := "kubepods/burstable/pod" + uid
	// Plain files are truncated before they are written (a kernel cgroup file is not), and the
	// agent refreshes the QoS shares from more than one goroutine: read until the values settle.
	for file, want := range map[string]string{
		"cpu/" + pod + "/cpu.shares":               "307",
		"memory/" + pod + "/memory.limit_in_bytes": "134217728",
		"pids/" + pod + "/pids.max":                "200",
		"cpu/kubepods/burstable/cpu.shares":        "307",
		"cpu/kubepods/besteffort/cpu.shares":       "2",
	} {
		h.eventually(file+" = "+want, func() bool { return read(file) == want })
	}
	h.eventually("kubepods capped", func() bool {
		return read("cpu/kubepods/cpu.shares") == itoa(cm.MilliCPUToShares(int64(1000*numCPU())-100))
	})

	// The pod goes: its request leaves the burstable tier.
	if err := os.Remove(filepath.Join(h.dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	h.eventually("burstable shares back to the minimum", func() bool { return read("cpu/kubepods/burstable/cpu.shares") == "2" })
}

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

func numCPU() int { return goruntime.NumCPU() }

// TestAgentStopsOnASystemdRuntime: a runtime whose RuntimeConfig says it places containers with
// systemd cannot run pods whose cgroups the agent keeps with cgroupfs: the agent stops with an
// error that says what to change, as the kubelet would not start.
func TestAgentStopsOnASystemdRuntime(t *testing.T) {
	h := newHarness(t)
	h.cri.SetCgroupDriver(runtimeapi.CgroupDriver_SYSTEMD)
	mount := t.TempDir()
	for _, s := range []string{"cpu", "memory", "pids", "hugetlb"} {
		if err := os.Mkdir(filepath.Join(mount, s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	h.cfg.PodsCgroup = "/kubepods"
	a, err := New(h.cfg, Deps{Cgroups: &cm.Cgroups{Mount: mount}})
	if err != nil {
		t.Fatal(err)
	}
	err = a.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "uses the systemd cgroup driver") || !strings.Contains(err.Error(), "SystemdCgroup = false") {
		t.Fatalf("Run: %v", err)
	}
}
