package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/cpuset"

	"github.com/nodelet/nodelet/agent/cm/cpumanager"
)

func TestCPUManagerOnNodeletRuntime(t *testing.T) { cpuManagerScenario(t, newEnv(t, onNodelet)) }
func TestCPUManagerOnContainerd(t *testing.T)     { cpuManagerScenario(t, newEnv(t, onContainerd)) }

const cpuPodTmpl = `apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: %s
    command: ["/bin/sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"]
%s`

const guaranteedOneCPU = `    resources:
      limits: {cpu: "1", memory: 64Mi}
`

// The static CPU policy on the real machine: the Guaranteed pod's container runs only on its
// exclusive CPU (what the kernel lets its processes run on: Cpus_allowed_list), the BestEffort
// pods never on it, and widen again when it goes; the checkpoint survives an agent restart, after
// which nothing moves and a new container still keeps off the exclusive CPU.
func cpuManagerScenario(t *testing.T, e *env) {
	online, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	all, err := cpuset.Parse(strings.TrimSpace(string(online)))
	if err != nil || all.Size() < 2 {
		t.Fatalf("the CPU manager test needs a machine with at least 2 online CPUs, this one has %q (%v)", online, err)
	}
	reserved := cpuset.New(all.List()[0])
	e.cfg.Kubelet.CPUManagerPolicy = cpumanager.PolicyStatic
	e.cfg.Kubelet.ReservedSystemCPUs = reserved.String()
	e.cfg.Kubelet.CPUManagerReconcilePeriod.Duration = time.Second
	e.startAgent()

	writePod := func(name, resources string) {
		tmp := filepath.Join(e.manifests, "."+name+".yaml")
		if err := os.WriteFile(tmp, []byte(fmt.Sprintf(cpuPodTmpl, name, e.reg+"/busybox:1", resources)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(e.manifests, name+".yaml")); err != nil {
			t.Fatal(err)
		}
	}
	runningID := func(pod string) string {
		e.eventually(pod+" running", func() bool { return len(running(e.containers(pod))) == 1 })
		return running(e.containers(pod))[0].Id
	}
	allowed := func(id string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := e.rt.Runtime.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id,
			Cmd: []string{"grep", "Cpus_allowed_list", "/proc/1/status"}, Timeout: 10})
		if err != nil || resp.ExitCode != 0 {
			return fmt.Sprintf("exec failed: %v %s", err, resp.GetStderr())
		}
		return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(resp.Stdout)), "Cpus_allowed_list:"))
	}
	waitAllowed := func(what, id string, want cpuset.CPUSet) {
		var got string
		e.eventually(fmt.Sprintf("%s on CPUs %s", what, want), func() bool {
			got = allowed(id)
			s, err := cpuset.Parse(got)
			return err == nil && s.Equals(want)
		})
	}

	writePod("be", "")
	be := runningID("be")
	waitAllowed("best-effort pod before any exclusive CPU", be, all)

	writePod("g", guaranteedOneCPU)
	g := runningID("g")
	exclusive := cpuset.New(all.Difference(reserved).List()[0])
	shared := all.Difference(exclusive)
	waitAllowed("Guaranteed container", g, exclusive)
	waitAllowed("best-effort pod beside it", be, shared)
	state := filepath.Join(e.cfg.RootDir, cpumanager.StateFile)
	before, err := os.ReadFile(state)
	if err != nil || !strings.Contains(string(before), fmt.Sprintf(`{"app":"%s"}`, exclusive)) {
		t.Fatalf("checkpoint %s: %v", before, err)
	}

	// Restart: the checkpoint is read back, no container moves or restarts, and a new
	// container is placed on the shared pool.
	e.killAgent()
	e.startAgent()
	writePod("be2", "")
	be2 := runningID("be2")
	waitAllowed("a new best-effort pod after the restart", be2, shared)
	if got := allowed(g); got != exclusive.String() {
		t.Fatalf("after the restart the Guaranteed container runs on %q", got)
	}
	if ids := running(e.containers("g")); len(ids) != 1 || ids[0].Id != g {
		t.Fatalf("the Guaranteed container was restarted: %v", ids)
	}
	if got := allowed(be); got != shared.String() {
		t.Fatalf("after the restart the best-effort container runs on %q", got)
	}

	// The Guaranteed pod goes: its CPU returns to everyone.
	if err := os.Remove(filepath.Join(e.manifests, "g.yaml")); err != nil {
		t.Fatal(err)
	}
	waitAllowed("best-effort pod after the Guaranteed pod went", be, all)
	waitAllowed("second best-effort pod after the Guaranteed pod went", be2, all)
	e.eventually("checkpoint without the Guaranteed pod", func() bool {
		b, _ := os.ReadFile(state)
		return strings.Contains(string(b), fmt.Sprintf(`"defaultCpuSet":"%s"`, all)) && !strings.Contains(string(b), `"entries"`)
	})
	for _, n := range []string{"be", "be2"} {
		os.Remove(filepath.Join(e.manifests, n+".yaml"))
	}
	e.eventually("all removed", func() bool { return len(e.containers("be"))+len(e.containers("be2")) == 0 })
}
