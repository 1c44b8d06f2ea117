package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const featuresPod = `apiVersion: v1
kind: Pod
metadata:
  name: features
  labels: {app: features}
spec:
  hostNetwork: %[1]v
  # The preStop hook's budget: the app stops at once on TERM, so a long one costs nothing, and a
  # loaded machine's exec (containerd's takes seconds then) still finishes the hook.
  terminationGracePeriodSeconds: 60
  volumes:
  - name: scratch
    emptyDir: {}
  - name: out
    hostPath: {path: %[2]q, type: DirectoryOrCreate}
  initContainers:
  - name: first
    image: %[3]s
    command: ["/bin/sh", "-c", "echo one > /scratch/order"]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
  - name: second
    image: %[3]s
    command: ["/bin/sh", "-c", "echo two >> /scratch/order"]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
  containers:
  - name: app
    image: %[3]s
    env:
    - {name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: GREETING, value: "hello $(POD)"}
    command: ["/bin/sh", "-c"]
    args: ["cat /scratch/order; echo $GREETING; hostname > /out/hostname; trap 'exit 0' TERM; while true; do sleep 1; done"]
    volumeMounts:
    - {name: scratch, mountPath: /scratch}
    - {name: out, mountPath: /out}
    readinessProbe:
      exec: {command: ["cat", "/scratch/order"]}
      periodSeconds: 1
      timeoutSeconds: 60
    livenessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
      timeoutSeconds: 60
    lifecycle:
      preStop:
        exec: {command: ["/bin/sh", "-c", "echo bye > /out/prestop"]}
`

// podFeatures runs init containers in order, emptyDir and hostPath volumes, env with fieldRef and
// $(VAR) expansion, the pod's hostname, container logs, exec probes, and a preStop hook on deletion.
func podFeatures(t testing.TB, e *env, hostNetwork bool) {
	e.startAgent()
	out := filepath.Join(t.TempDir(), "out")
	body := fmt.Sprintf(featuresPod, hostNetwork, out, e.reg+"/busybox:1")
	if err := os.WriteFile(filepath.Join(e.manifests, "features.yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	e.eventually("app running", func() bool {
		for _, c := range running(e.containers("features")) {
			if c.Metadata.Name == "app" {
				return true
			}
		}
		return false
	})
	// The readiness probe runs through the runtime's ExecSync.
	e.eventually("pod Ready", func() bool {
		p, ok := e.agent.PodState().Pod("default", "features-e2e")
		if !ok {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				return true
			}
		}
		return false
	})
	var logText string
	e.eventually("app log written", func() bool {
		logs, _ := filepath.Glob(filepath.Join(e.cfg.Kubelet.PodLogsDir, "default_features-e2e_*", "app", "0.log"))
		if len(logs) == 0 {
			return false
		}
		b, _ := os.ReadFile(logs[0])
		logText = string(b)
		return strings.Contains(logText, "hello features-e2e")
	})
	if !strings.Contains(logText, "one") || strings.Index(logText, "one") > strings.Index(logText, "two") {
		t.Errorf("init containers did not run in order; app log:\n%s", logText)
	}
	if !hostNetwork {
		b, _ := os.ReadFile(filepath.Join(out, "hostname"))
		if strings.TrimSpace(string(b)) != "features-e2e" {
			t.Errorf("hostname %q, want features-e2e", b)
		}
	}
	os.Remove(filepath.Join(e.manifests, "features.yaml"))
	e.eventually("pod removed", func() bool { return len(e.sandboxes("features")) == 0 })
	if b, err := os.ReadFile(filepath.Join(out, "prestop")); err != nil || strings.TrimSpace(string(b)) != "bye" {
		t.Errorf("preStop hook did not run: %q %v", b, err)
	}
	// The pod's folder goes right after its containers and sandbox.
	e.eventually("pod volume dirs removed", func() bool {
		ents, _ := os.ReadDir(filepath.Join(e.cfg.RootDir, "pods"))
		return len(ents) == 0
	})
}

func TestPodFeaturesOnContainerd(t *testing.T) {
	e := newEnv(t, onContainerd)
	// containerd here has no CNI network, so the pod shares the host's.
	podFeatures(t, e, true)
}

func TestPodFeaturesOnNodeletRuntime(t *testing.T) {
	e := newEnv(t, onNodelet)
	podFeatures(t, e, false)
}
