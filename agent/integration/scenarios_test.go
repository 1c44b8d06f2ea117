package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent"
	"github.com/nodelet/nodelet/agent/agentconfig"
	"github.com/nodelet/nodelet/test/harness/crirt"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// env is one runtime with an image registry and an agent on top.
type env struct {
	t         testing.TB
	rt        *criRuntime
	reg       string
	manifests string
	cfg       agentconfig.Config
	stopAgent func()
	agent     *agent.Agent
}

// cgroupRoot is unique per test process, and removed at the end.
func cgroupRoot(t testing.TB) string {
	root := fmt.Sprintf("/nodelet-e2e-%d", os.Getpid())
	t.Cleanup(func() { testutil.RemoveCgroupRootOrFail(t, root) })
	return root
}

func newEnv(t testing.TB, start func(t testing.TB, dir, reg string) *criRuntime) *env {
	return newEnvIn(t, t.TempDir(), start)
}

// newEnvIn is newEnv with the runtime's and the agent's folders in dir (a filesystem of the
// test's own, say).
func newEnvIn(t testing.TB, dir string, start func(t testing.TB, dir, reg string) *criRuntime) *env {
	testutil.CheckNoLeaks(t, dir)
	// A stopped agent leaves its running pods' volumes mounted (their API volumes are tmpfs), as
	// the kubelet does; once the runtime's cleanup has removed the pods, they go too.
	t.Cleanup(func() { testutil.UnmountUnder(filepath.Join(dir, "agent")) })
	reg := crirt.ServeRegistry(t)
	layer := crirt.BusyboxLayer(t)
	pushBusybox(t, layer, reg+"/busybox:1", "/bin/sh")
	pushBusybox(t, layer, reg+"/busybox:2", "/bin/sh")
	// Runtimes ask for registry.k8s.io/pause:3.9; their mirror settings send that to the loopback registry.
	pushBusybox(t, layer, reg+"/pause:3.9", "/bin/sleep", "2147483647")
	e := &env{t: t, reg: reg, manifests: filepath.Join(dir, "manifests")}
	_ = os.MkdirAll(e.manifests, 0o755)
	// Made before the runtime starts, so that its removal runs after the runtime's cleanup has
	// removed every pod (cleanups run last-registered first): a live container keeps its cgroup.
	root := cgroupRoot(t)
	e.rt = start(t, filepath.Join(dir, "rt"), reg)
	e.cfg = agentconfig.Default()
	e.cfg.Kubelet.ContainerRuntimeEndpoint = e.rt.Endpoint
	e.cfg.Kubelet.StaticPodPath = e.manifests
	e.cfg.RootDir = filepath.Join(dir, "agent")
	e.cfg.Kubelet.PodLogsDir = filepath.Join(dir, "logs")
	e.cfg.HostnameOverride = "e2e"
	e.cfg.Kubelet.HealthzPort = new(int32(0))
	e.cfg.PodsCgroup = root
	e.cfg.Kubelet.FileCheckFrequency.Duration = time.Second
	return e
}

func (e *env) startAgent() {
	e.t.Helper()
	a, err := agent.New(e.cfg, agent.Deps{})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.Run(ctx)
	}()
	e.agent = a
	e.stopAgent = func() { cancel(); <-done }
	e.t.Cleanup(func() {
		if e.stopAgent != nil {
			e.stopAgent()
			e.stopAgent = nil
		}
	})
}

// killAgent ends the agent without any cleanup, as SIGKILL would: the runtime keeps everything.
func (e *env) killAgent() {
	e.stopAgent()
	e.stopAgent = nil
}

const podTmpl = `apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 2
  restartPolicy: %s
  containers:
  - name: app
    image: %s
    command: ["/bin/sh", "-c", %q]
`

func (e *env) writePod(name, restart, image, script string) {
	e.t.Helper()
	tmp := filepath.Join(e.manifests, "."+name+".yaml")
	if err := os.WriteFile(tmp, []byte(fmt.Sprintf(podTmpl, name, restart, image, script)), 0o644); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(e.manifests, name+".yaml")); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) containers(podName string) []*runtimeapi.Container {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.rt.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.name": podName + "-e2e"}}})
	if err != nil {
		e.t.Fatalf("list containers: %v", err)
	}
	return resp.Containers
}

func (e *env) sandboxes(podName string) []*runtimeapi.PodSandbox {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := e.rt.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.name": podName + "-e2e"}}})
	if err != nil {
		e.t.Fatalf("list sandboxes: %v", err)
	}
	return resp.Items
}

func running(cs []*runtimeapi.Container) []*runtimeapi.Container {
	var out []*runtimeapi.Container
	for _, c := range cs {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			out = append(out, c)
		}
	}
	return out
}

// eventually polls cond; the limit guards against a hang and is not a speed assertion.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const loop = "trap 'exit 0' TERM; while true; do sleep 1; done"

// staticPodScenarios is the matrix every runtime must pass: add, restart, edit, agent restart, delete.
func staticPodScenarios(t testing.TB, e *env) {
	e.startAgent()
	img1, img2 := e.reg+"/busybox:1", e.reg+"/busybox:2"

	e.writePod("web", "Always", img1, loop)
	e.writePod("crash", "Always", img1, "exit 3")
	e.writePod("once", "Never", img1, "exit 0")
	e.eventually("web running", func() bool { return len(running(e.containers("web"))) == 1 })
	web := running(e.containers("web"))[0]

	e.eventually("crash restarted once", func() bool {
		for _, c := range e.containers("crash") {
			if c.Annotations["io.kubernetes.container.restartCount"] == "1" {
				return true
			}
		}
		return false
	})
	e.eventually("once finished and not restarted, sandbox stopped", func() bool {
		cs, sbs := e.containers("once"), e.sandboxes("once")
		return len(cs) == 1 && cs[0].State == runtimeapi.ContainerState_CONTAINER_EXITED &&
			len(sbs) == 1 && sbs[0].State == runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	})

	// SIGKILL-like agent restart: nothing running is restarted or duplicated.
	e.killAgent()
	e.startAgent()
	time.Sleep(3 * time.Second) // let several syncs and housekeeping passes run
	cs := e.containers("web")
	if len(cs) != 1 || cs[0].Id != web.Id || cs[0].State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("after agent restart web's containers are %v, want only %s running", cs, web.Id)
	}
	if got := e.containers("once"); len(got) != 1 {
		t.Fatalf("after agent restart the finished pod has %d containers", len(got))
	}

	// Edit: the pod is replaced by one with the new image.
	e.writePod("web", "Always", img2, loop)
	e.eventually("edited web running alone", func() bool {
		r := running(e.containers("web"))
		return len(r) == 1 && r[0].Id != web.Id && len(e.containers("web")) == 1
	})

	// The container dies on its own: restarted with restart count 1.
	cur := running(e.containers("web"))[0]
	ctx := context.Background()
	if _, err := e.rt.Runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: cur.Id, Timeout: 0}); err != nil {
		t.Fatal(err)
	}
	e.eventually("web restarted", func() bool {
		r := running(e.containers("web"))
		return len(r) == 1 && r[0].Annotations["io.kubernetes.container.restartCount"] == "1"
	})

	// Delete every manifest: everything is stopped and removed.
	for _, n := range []string{"web", "crash", "once"} {
		os.Remove(filepath.Join(e.manifests, n+".yaml"))
	}
	e.eventually("all removed", func() bool {
		return len(e.containers("web"))+len(e.containers("crash"))+len(e.containers("once")) == 0 &&
			len(e.sandboxes("web"))+len(e.sandboxes("crash"))+len(e.sandboxes("once")) == 0
	})
	// The pods' cgroups go right after their sandboxes.
	e.eventually("pod cgroups removed", func() bool {
		for _, base := range []string{"/sys/fs/cgroup/memory", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/pids", "/sys/fs/cgroup/unified"} {
			if left, _ := filepath.Glob(filepath.Join(base, e.cfg.PodsCgroup, "*", "pod*")); len(left) > 0 {
				return false
			}
		}
		return true
	})
	logs, _ := filepath.Glob(filepath.Join(e.cfg.Kubelet.PodLogsDir, "default_web-e2e_*", "app", "*.log"))
	if len(logs) == 0 {
		t.Errorf("no container logs under %s", e.cfg.Kubelet.PodLogsDir)
	}
}

func TestStaticPodsOnContainerd(t *testing.T) {
	e := newEnv(t, onContainerd)
	staticPodScenarios(t, e)
}

func TestStaticPodsOnNodeletRuntime(t *testing.T) {
	e := newEnv(t, onNodelet)
	staticPodScenarios(t, e)
}
