package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/harness/kubefake"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/agentconfig"
	"github.com/nodelet/nodelet/test/harness/fakecri"
)

const manifest = `apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: %s
    imagePullPolicy: IfNotPresent
`

type harness struct {
	t      *testing.T
	cri    *fakecri.Server
	dir    string
	cfg    agentconfig.Config
	cancel context.CancelFunc
	done   chan struct{}
	agent  *Agent
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, cri: fakecri.Start(t), dir: t.TempDir()}
	h.cri.AddImage("busybox:1")
	h.cri.AddImage("busybox:2")
	h.cfg = agentconfig.Default()
	h.cfg.Kubelet.ContainerRuntimeEndpoint = h.cri.Endpoint
	h.cfg.Kubelet.StaticPodPath = h.dir
	h.cfg.RootDir = t.TempDir()
	h.cfg.Kubelet.PodLogsDir = t.TempDir()
	h.cfg.HostnameOverride = "node1"
	h.cfg.Kubelet.HealthzPort = new(int32(0))
	h.cfg.PodsCgroup = ""
	h.cfg.Kubelet.ResolverConfig = new("")
	return h
}

func (h *harness) start(opts Deps) {
	h.t.Helper()
	opts.HousekeepingPeriod, opts.RelistPeriod = 20*time.Millisecond, 20*time.Millisecond
	a, err := New(h.cfg, opts)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.agent, h.cancel, h.done = a, cancel, make(chan struct{})
	go func() {
		defer close(h.done)
		a.Run(ctx)
	}()
	h.t.Cleanup(h.stop)
}

// stop ends the agent as a SIGKILL would for the runtime's view: the containers stay.
func (h *harness) stop() {
	if h.cancel != nil {
		h.cancel()
		<-h.done
		h.cancel = nil
	}
}

func (h *harness) write(name, body string) {
	h.t.Helper()
	tmp := filepath.Join(h.dir, "."+name)
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(h.dir, name)); err != nil {
		h.t.Fatal(err)
	}
}

// eventually waits for cond; the limit only guards against a hang, it is not a speed assertion.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s; calls: %q", what, h.cri.Calls())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) running() []*runtimeapi.ContainerStatus {
	var out []*runtimeapi.ContainerStatus
	for _, c := range h.cri.Containers() {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			out = append(out, c)
		}
	}
	return out
}

func TestStaticPodLifecycle(t *testing.T) {
	h := newHarness(t)
	h.start(Deps{})
	h.write("web.yaml", fmt.Sprintf(manifest, "web", "busybox:1"))
	h.eventually("web running", func() bool { return len(h.running()) == 1 })
	first := h.running()[0]
	if first.Labels["io.kubernetes.pod.name"] != "web-node1" {
		t.Fatalf("labels %v", first.Labels)
	}
	h.eventually("status Running", func() bool {
		for _, p := range h.agent.PodState().Pods() {
			if p.Name == "web-node1" && p.Status.Phase == v1.PodRunning && p.Status.ContainerStatuses[0].ContainerID == "fakecri://"+first.Id {
				return true
			}
		}
		return false
	})

	// The container dies: PLEG wakes the worker and it is restarted with restart count 1.
	h.cri.ExitContainer(first.Id, 1)
	h.eventually("restart", func() bool {
		r := h.running()
		return len(r) == 1 && r[0].Id != first.Id && r[0].Annotations["io.kubernetes.container.restartCount"] == "1"
	})

	// Edit: the old pod goes (new UID), the new one runs the new image.
	h.write("web.yaml", fmt.Sprintf(manifest, "web", "busybox:2"))
	h.eventually("edited pod running alone", func() bool {
		r := h.running()
		return len(r) == 1 && r[0].Image.UserSpecifiedImage == "busybox:2"
	})
	h.eventually("old pod removed", func() bool { return len(h.cri.Sandboxes()) == 1 })

	// Delete: stopped, then containers and sandbox removed.
	os.Remove(filepath.Join(h.dir, "web.yaml"))
	h.eventually("everything removed", func() bool { return len(h.cri.Containers()) == 0 && len(h.cri.Sandboxes()) == 0 })
	if err := h.agent.Healthz(); err != nil {
		t.Fatal(err)
	}
}

func TestBadManifestDoesNotStopOthers(t *testing.T) {
	h := newHarness(t)
	h.write("bad.yaml", "kind: Pod\nmetadata: {name: bad}\nspec: {containers: [{name: Bad_Name}]}\n")
	h.write("good.yaml", fmt.Sprintf(manifest, "good", "busybox:1"))
	h.start(Deps{})
	h.eventually("good running", func() bool { return len(h.running()) == 1 })
}

func TestAgentRestartKeepsContainersAndRemovesOrphans(t *testing.T) {
	h := newHarness(t)
	h.write("a.yaml", fmt.Sprintf(manifest, "a", "busybox:1"))
	h.write("b.yaml", fmt.Sprintf(manifest, "b", "busybox:1"))
	h.start(Deps{})
	h.eventually("two pods running", func() bool { return len(h.running()) == 2 })
	before := h.running()
	h.stop()

	// While the agent is down, b's manifest goes away.
	os.Remove(filepath.Join(h.dir, "b.yaml"))
	h.cri.ResetCalls()
	h.start(Deps{})
	h.eventually("orphan b removed", func() bool { return len(h.cri.Containers()) == 1 && len(h.cri.Sandboxes()) == 1 })
	after := h.running()
	if len(after) != 1 || !slices.ContainsFunc(before, func(c *runtimeapi.ContainerStatus) bool { return c.Id == after[0].Id }) {
		t.Fatalf("a's container was replaced: before %v after %v", before, after)
	}
	// Let a few syncs pass; nothing may be created or started for a.
	h.eventually("a status known", func() bool {
		ps := h.agent.PodState().Pods()
		return len(ps) == 1 && ps[0].Status.Phase == v1.PodRunning
	})
	if got := h.cri.CallsWithPrefix("CreateContainer"); len(got) != 0 {
		t.Fatalf("restart created containers: %q", got)
	}
	if got := h.cri.CallsWithPrefix("RunPodSandbox"); len(got) != 0 {
		t.Fatalf("restart created sandboxes: %q", got)
	}
}

func TestPLEGFallbackWithoutEventStream(t *testing.T) {
	h := newHarness(t)
	h.cri.DisableEvents()
	h.write("web.yaml", fmt.Sprintf(manifest, "web", "busybox:1"))
	h.start(Deps{})
	h.eventually("running", func() bool { return len(h.running()) == 1 })
	id := h.running()[0].Id
	h.cri.ExitContainer(id, 0)
	h.eventually("restarted by relist", func() bool { r := h.running(); return len(r) == 1 && r[0].Id != id })
}

func TestClusterPodsMirrorsAndNode(t *testing.T) {
	h := newHarness(t)
	grace := int64(1)
	apiPod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "api-pod", Namespace: "default", UID: "api-uid"},
		Spec: v1.PodSpec{NodeName: "node1", RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
			Containers: []v1.Container{{Name: "c", Image: "busybox:1", ImagePullPolicy: v1.PullIfNotPresent}}}}
	client := fake.NewSimpleClientset(apiPod)
	h.write("static.yaml", fmt.Sprintf(manifest, "static", "busybox:1"))
	h.start(Deps{KubeClient: kubefake.Wrap(client)})
	ctx := context.Background()
	h.eventually("both running", func() bool { return len(h.running()) == 2 })
	h.eventually("node registered and ready", func() bool {
		n, err := client.CoreV1().Nodes().Get(ctx, "node1", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
				return true
			}
		}
		return false
	})
	h.eventually("mirror pod", func() bool {
		m, err := client.CoreV1().Pods("default").Get(ctx, "static-node1", metav1.GetOptions{})
		return err == nil && m.Annotations["kubernetes.io/config.mirror"] != ""
	})
	h.eventually("api pod status Running", func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "api-pod", metav1.GetOptions{})
		return err == nil && p.Status.Phase == v1.PodRunning
	})
	h.eventually("lease", func() bool {
		_, err := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "node1", metav1.GetOptions{})
		return err == nil
	})

	// Graceful delete from the apiserver: containers stop, then the node confirms and the object goes.
	p, _ := client.CoreV1().Pods("default").Get(ctx, "api-pod", metav1.GetOptions{})
	now := metav1.Now()
	p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, &grace
	if _, err := client.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("api pod gone", func() bool {
		_, err := client.CoreV1().Pods("default").Get(ctx, "api-pod", metav1.GetOptions{})
		return err != nil && len(h.running()) == 1
	})
	if got := h.cri.CallsWithPrefix("StopContainer c "); len(got) != 1 || got[0] != "StopContainer c timeout=2" {
		t.Fatalf("kill calls %q", got)
	}
}

func TestLivenessProbeFailureRestartsContainer(t *testing.T) {
	h := newHarness(t)
	h.write("web.yaml", fmt.Sprintf(manifest, "web", "busybox:1")+`    livenessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
      failureThreshold: 1
`)
	h.start(Deps{})
	h.eventually("running", func() bool { return len(h.running()) == 1 })
	first := h.running()[0].Id
	h.cri.SetExecExitCode(1)
	// It is restarted once at once; failing again, its next restart waits out the crash-loop back-off.
	h.eventually("CrashLoopBackOff", func() bool {
		p, ok := h.agent.PodState().Pod("default", "web-node1")
		if !ok || len(p.Status.ContainerStatuses) == 0 {
			return false
		}
		cs := p.Status.ContainerStatuses[0]
		w := cs.State.Waiting
		return w != nil && w.Reason == "CrashLoopBackOff" && len(h.running()) == 0 && cs.RestartCount == 1 &&
			len(h.cri.Containers()) == 1 // older dead attempts pruned
	})
	if cs := h.cri.Containers(); cs[0].Id == first {
		t.Fatalf("containers %v", cs)
	}
	if n := len(h.cri.CallsWithPrefix("StartContainer")); n != 2 {
		t.Fatalf("%d starts, want 2 (first run and one restart before the back-off)", n)
	}
}

// A standalone agent takes RuntimeClasses from its manifest folder: the pod gets the overhead and
// the scheduling the apiserver's admission would give it, is admitted on them against this node's
// labels, and its sandbox runs with the RuntimeClass's handler, whatever the name.
func TestFolderRuntimeClasses(t *testing.T) {
	h := newHarness(t)
	h.cfg.NodeLabels = map[string]string{"sandbox": "vm"}
	h.write("classes.yaml", `apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: vm}
handler: fakevm
overhead: {podFixed: {cpu: 100m, memory: 32Mi}}
scheduling: {nodeSelector: {sandbox: vm}}
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: elsewhere}
handler: fakevm
scheduling: {nodeSelector: {zone: mars}}
`)
	withClass := func(name, class string) string {
		return fmt.Sprintf(manifest, name, "busybox:1") + "  runtimeClassName: " + class + "\n"
	}
	h.write("web.yaml", withClass("web", "vm"))
	h.write("far.yaml", withClass("far", "elsewhere"))
	h.start(Deps{})
	h.eventually("web running", func() bool { return len(h.running()) == 1 })
	if !slices.Contains(h.cri.Calls(), "handler fakevm") {
		t.Errorf("no sandbox with the RuntimeClass's handler: %q", h.cri.Calls())
	}
	h.eventually("web with its overhead", func() bool {
		for _, p := range h.agent.PodState().Pods() {
			if p.Name == "web-node1" {
				return p.Spec.Overhead.Memory().Equal(resource.MustParse("32Mi")) && p.Status.Phase == v1.PodRunning
			}
		}
		return false
	})
	refused := func() bool {
		for _, e := range h.agent.events.PodEvents("default", "far-node1") {
			if e.Reason == "NodeAffinity" {
				return true
			}
		}
		return false
	}
	h.eventually("far refused on its RuntimeClass's node selector", refused)
	// That housekeeping keeps these events while the refused pod's file is still listed is
	// syncloop's TestHousekeepingChores: a pass there is one loop iteration, not a wait.
}
