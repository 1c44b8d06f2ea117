package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodelet/nodelet/internal/cgroupfs"
	"github.com/nodelet/nodelet/test/harness/testimage"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// TestUpRuntimeClassFromTheFolder: a RuntimeClass written beside the static pods picks gVisor for a
// pod by name, and its overhead reaches the pod's cgroup on top of the containers' limits, as the
// apiserver's admission and the kubelet together do in a cluster.
func TestUpRuntimeClassFromTheFolder(t *testing.T) {
	testutil.Require(t, "runsc")
	host := testimage.Serve(t, map[string]v1.Image{"library/busybox:rc": testimage.MustBusybox()})
	manifests := t.TempDir()
	files := map[string]string{
		"gvisor.yaml": `apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: gvisor}
handler: runsc
overhead: {podFixed: {cpu: 100m, memory: 96Mi}}
`,
		"sandboxed.yaml": `apiVersion: v1
kind: Pod
metadata: {name: sandboxed}
spec:
  runtimeClassName: gvisor
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox:rc
    command: ["sleep", "3600"]
    resources: {limits: {cpu: 200m, memory: 64Mi}}
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(manifests, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d := startDaemon(t, "up", "nle2erc0", "10.252.1.0/24",
		"--manifests", manifests, "--api-socket", filepath.Join(t.TempDir(), "agent.sock"),
		"--hostname-override", "e2e-node", "--pod-logs-dir", filepath.Join(t.TempDir(), "logs"),
		"--registry-mirror", "docker.io=http://"+host)

	type sandbox struct {
		Metadata       struct{ UID string }
		RuntimeHandler string
	}
	var sb sandbox
	waitFor(t, "the gVisor pod to run", func() bool {
		if out, err := d.crictlErr("ps", "--name", "main", "--state", "running", "-q"); err != nil || strings.TrimSpace(out) == "" {
			return false
		}
		out, err := d.crictlErr("pods", "--name", "sandboxed-e2e-node", "--state", "ready", "-o", "json")
		var list struct{ Items []sandbox }
		if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list.Items) != 1 {
			return false
		}
		sb = list.Items[0]
		return true
	})
	if sb.RuntimeHandler != "runsc" {
		t.Errorf("the sandbox runs with handler %q, want the RuntimeClass's runsc", sb.RuntimeHandler)
	}

	// A Guaranteed pod's cgroup sits right under the agent's root: its limits are the containers'
	// plus the overhead (64Mi + 96Mi of memory, 200m + 100m of cpu over the 100ms period).
	pod := d.cgroupRoot + "/pod" + sb.Metadata.UID
	want := map[string]string{
		"memory": fmt.Sprint(160 << 20),
		"cpu":    "30000",
	}
	got := map[string]string{}
	if fs := cgroupfs.Host(); fs.Unified() {
		got["memory"] = readTrimmed(t, filepath.Join(fs.Dir("memory", pod), "memory.max"))
		got["cpu"] = strings.Fields(readTrimmed(t, filepath.Join(fs.Dir("cpu", pod), "cpu.max")))[0]
	} else {
		got["memory"] = readTrimmed(t, filepath.Join(fs.Dir("memory", pod), "memory.limit_in_bytes"))
		got["cpu"] = readTrimmed(t, filepath.Join(fs.Dir("cpu", pod), "cpu.cfs_quota_us"))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pod cgroup %s: %v, want %v", pod, got, want)
	}
}

func readTrimmed(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}
