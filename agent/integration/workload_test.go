package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

const objectsTmpl = `apiVersion: v1
kind: ConfigMap
metadata: {name: site}
data: {index.html: %q}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {token: s3cret}
`

// shopTmpl is a workload a user brings: an init container fills an emptyDir from a config map, a
// sidecar tails a log through a subPath, and the main container serves HTTP with probes and hooks.
const shopTmpl = `apiVersion: v1
kind: Pod
metadata: {name: shop}
spec:
%[3]s
  terminationGracePeriodSeconds: 2
  volumes:
  - {name: www, emptyDir: {}}
  - {name: mem, emptyDir: {medium: Memory, sizeLimit: 1Mi}}
  - {name: site, configMap: {name: site}}
  - {name: creds, secret: {secretName: creds, defaultMode: 0400}}
  - name: info
    downwardAPI:
      items:
      - {path: name, fieldRef: {fieldPath: metadata.name}}
      - {path: mem, resourceFieldRef: {containerName: web, resource: limits.memory, divisor: 1Mi}}
  initContainers:
  - name: init
    image: %[1]s
    command: [sh, -c, "echo ok > /www/healthz && echo ok > /www/ready && cp /site/index.html /www/ && mkdir -p /www/logs"]
    volumeMounts: [{name: www, mountPath: /www}, {name: site, mountPath: /site}]
  - name: tail
    image: %[1]s
    restartPolicy: Always
    command: [sh, -c, "touch /logs/access.log && tail -f /logs/access.log"]
    volumeMounts: [{name: www, mountPath: /logs, subPath: logs}]
  containers:
  - name: web
    image: %[1]s
    command: [sh, -c, "exec httpd -f -p %[4]s%[2]d -h /www"]
    ports: [{name: http, containerPort: %[2]d}]
    resources: {limits: {memory: 64Mi}}
    lifecycle:
      postStart: {exec: {command: [sh, -c, "echo started > /www/poststart"]}}
      preStop: {exec: {command: [sh, -c, "echo stopping >> /www/logs/access.log"]}}
    readinessProbe: {httpGet: {%[5]spath: /ready, port: http}, periodSeconds: 1, failureThreshold: 1, timeoutSeconds: 60}
    livenessProbe: {exec: {command: [test, -e, /www/healthz]}, periodSeconds: 1, failureThreshold: 1, timeoutSeconds: 60}
    volumeMounts:
    - {name: www, mountPath: /www}
    - {name: site, mountPath: /site}
    - {name: creds, mountPath: /creds}
    - {name: info, mountPath: /info}
    - {name: mem, mountPath: /mem}
`

func freeLoopbackPort(t testing.TB) int { return testutil.FreePort(t) }

func (e *env) exec(id string, cmd ...string) string {
	e.t.Helper()
	resp, err := e.rt.Runtime.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: 30})
	if err != nil || resp.ExitCode != 0 {
		e.t.Fatalf("exec %v: %v %v %s", cmd, err, resp.GetExitCode(), resp.GetStderr())
	}
	return string(resp.Stdout)
}

func (e *env) runningNamed(pod, name string) string {
	for _, c := range running(e.containers(pod)) {
		if c.Metadata.Name == name {
			return c.Id
		}
	}
	return ""
}

func (e *env) podReady(name string) (bool, int32) {
	p, ok := e.agent.PodState().Pod("default", name+"-e2e")
	if !ok {
		return false, 0
	}
	var restarts int32
	for _, cs := range p.Status.ContainerStatuses {
		restarts += cs.RestartCount
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue, restarts
		}
	}
	return false, restarts
}

// workloadScenario runs the shop on the host's network, as every runtime can. Its web server
// listens on the host's loopback only, so its readiness probe names that host: without one a
// probe goes to the pod's IP, which for a host-network pod is the node's, as with the kubelet.
func workloadScenario(t testing.TB, e *env) {
	workloadScenarioOn(t, e, "  hostNetwork: true", "127.0.0.1:", freeLoopbackPort(t), "")
}

// workloadScenarioOn runs the shop with spec lines of the caller's (network, runtime class) and
// its web server listening on addr+port; the host reaches it at the pod's IP unless it shares the
// host's network. A handler other than "" is the one the pod's sandbox must run on.
func workloadScenarioOn(t testing.TB, e *env, spec, addr string, port int, handler string) {
	e.cfg.Kubelet.SyncFrequency.Duration = 2 * time.Second // the config map edit shows at the next periodic sync
	writeFile(t, filepath.Join(e.manifests, "objects.yaml"), fmt.Sprintf(objectsTmpl, "hello v1"))
	probeHost := ""
	if addr != "" {
		probeHost = "host: " + strings.TrimSuffix(addr, ":") + ", "
	}
	writeFile(t, filepath.Join(e.manifests, "shop.yaml"), fmt.Sprintf(shopTmpl, e.reg+"/busybox:1", port, spec, addr, probeHost))
	e.startAgent()

	e.eventually("shop ready", func() bool { ready, _ := e.podReady("shop"); return ready })
	web, tail := e.runningNamed("shop", "web"), e.runningNamed("shop", "tail")
	if web == "" || tail == "" {
		t.Fatalf("web %q tail %q not both running", web, tail)
	}
	if sbs := e.sandboxes("shop"); handler != "" && (len(sbs) != 1 || sbs[0].RuntimeHandler != handler) {
		t.Fatalf("want one sandbox on %s: %v", handler, sbs)
	}
	host := "127.0.0.1"
	if p, _ := e.agent.PodState().Pod("default", "shop-e2e"); p != nil && !p.Spec.HostNetwork {
		host = p.Status.PodIP
	}
	resp, err := http.Get("http://" + net.JoinHostPort(host, strconv.Itoa(port)) + "/index.html")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "hello v1" {
		t.Fatalf("served %q", body)
	}
	for cmd, want := range map[string]string{
		"cat /creds/token":           "s3cret",
		"stat -L -c %a /creds/token": "400\n",
		"cat /info/name":             "shop-e2e",
		"cat /info/mem":              "64",
		"cat /www/poststart":         "started\n",
		"readlink /site/..data":      "..",
	} {
		if got := e.exec(web, "sh", "-c", cmd); !strings.HasPrefix(got, want) {
			t.Errorf("%s: %q, want %q", cmd, got, want)
		}
	}
	// The sidecar sees the main container's log through its subPath.
	e.exec(web, "sh", "-c", "echo GET >> /www/logs/access.log")
	if got := e.exec(tail, "cat", "/logs/access.log"); got != "GET\n" {
		t.Errorf("sidecar reads %q", got)
	}
	if _, err := os.Stat(filepath.Join(e.cfg.RootDir, "pods")); err != nil {
		t.Fatal(err)
	}

	// The config map changes: the file changes in place, in the running container.
	writeFile(t, filepath.Join(e.manifests, "objects.yaml"), fmt.Sprintf(objectsTmpl, "hello v2"))
	e.eventually("config map update in the container", func() bool { return e.exec(web, "cat", "/site/index.html") == "hello v2" })

	// Readiness goes with /ready, without a restart; liveness fails with /healthz and restarts web.
	e.exec(web, "rm", "/www/ready")
	e.eventually("not ready", func() bool { ready, _ := e.podReady("shop"); return !ready })
	if _, restarts := e.podReady("shop"); restarts != 0 {
		t.Fatalf("%d restarts on a readiness failure", restarts)
	}
	e.exec(web, "sh", "-c", "echo ok > /www/ready && rm /www/healthz")
	e.eventually("web restarted by its liveness probe", func() bool { return e.runningNamed("shop", "web") != web && e.runningNamed("shop", "web") != "" })
	events := e.agent.Events().PodEvents("default", "shop-e2e")
	var unhealthy, killing bool
	for _, ev := range events {
		unhealthy = unhealthy || ev.Reason == "Unhealthy"
		killing = killing || ev.Reason == "Killing"
	}
	if !unhealthy || !killing {
		t.Errorf("events lack Unhealthy or Killing: %v", events)
	}
	// The liveness file is gone from the shared emptyDir, so put it back for the restarted web.
	web = e.runningNamed("shop", "web")
	e.exec(web, "sh", "-c", "echo ok > /www/healthz")
	e.eventually("ready again", func() bool { ready, _ := e.podReady("shop"); return ready })

	// Deleting the pod tears its volumes down: no mount and no folder left.
	os.Remove(filepath.Join(e.manifests, "shop.yaml"))
	e.eventually("shop removed", func() bool { return len(e.containers("shop")) == 0 && len(e.sandboxes("shop")) == 0 })
	e.eventually("pod folder removed", func() bool {
		entries, _ := os.ReadDir(filepath.Join(e.cfg.RootDir, "pods"))
		return len(entries) == 0 && len(testutil.MountsUnder(e.cfg.RootDir)) == 0
	})
}

func writeFile(t testing.TB, path, content string) {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestWorkloadOnNodeletRuntime(t *testing.T) {
	e := newEnv(t, onNodelet)
	workloadScenario(t, e)
}

func TestWorkloadOnContainerd(t *testing.T) {
	e := newEnv(t, onContainerd)
	workloadScenario(t, e)
}

// TestWorkloadOnGvisor: the same workload in one gVisor sandbox on a pod network of its own: its
// readiness probe and the host reach it at the pod IP, exec and the sidecar work inside gVisor,
// and the liveness restart replaces a container inside the same sandbox.
func TestWorkloadOnGvisor(t *testing.T) {
	testutil.Require(t, "runsc")
	e := newEnv(t, onNodeletWithNetwork)
	workloadScenarioOn(t, e, "  runtimeClassName: runsc", "", 8080, "runsc")
	if n := len(e.sandboxes("shop")); n != 0 {
		t.Fatalf("%d sandboxes left", n)
	}
}

// TestImageGCThroughTheAgent: with thresholds that always trigger, the agent's collector removes
// an image no container uses and keeps the running pod's.
func TestImageGCThroughTheAgent(t *testing.T) {
	e := newEnv(t, onNodelet)
	images := runtimeapi.NewImageServiceClient(e.rt.Conn)
	ctx := context.Background()
	unused := e.reg + "/pause:3.9" // busybox:2 is busybox:1 under another tag: the same image, in use
	if _, err := images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: unused}}); err != nil {
		t.Fatal(err)
	}
	e.cfg.Kubelet.ImageGCHighThresholdPercent, e.cfg.Kubelet.ImageGCLowThresholdPercent = new(int32(1)), new(int32(0))
	e.cfg.Kubelet.ImageMinimumGCAge.Duration = 0
	e.writePod("web", "Always", e.reg+"/busybox:1", loop)
	a, err := agent.New(e.cfg, agent.Deps{ImageGCPeriod: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	actx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); a.Run(actx) }()
	t.Cleanup(func() { cancel(); <-done })
	e.eventually("web running", func() bool { return len(running(e.containers("web"))) == 1 })
	e.eventually("unused image removed", func() bool {
		st, err := images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: unused}})
		return err == nil && st.Image == nil
	})
	st, err := images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: e.reg + "/busybox:1"}})
	if err != nil || st.Image == nil {
		t.Fatalf("image in use removed: %v", err)
	}
}
