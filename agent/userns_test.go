package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Static pods with hostUsers: false, over the fake CRI (its default handler has no user
// namespaces, its "fake" handler has them): a range left by a pod deleted while the agent was
// away is held from the start and freed by housekeeping; a pod on the default handler is refused
// with the kubelet's event and never run; a pod whose RuntimeClass names "fake" runs with a range
// of its own, freed once it is deleted.
func TestHostUsersFalseStaticPods(t *testing.T) {
	h := newHarness(t)
	orphan := filepath.Join(h.cfg.RootDir, "pods", "gone-uid")
	os.MkdirAll(orphan, 0o750)
	os.WriteFile(filepath.Join(orphan, "userns"), []byte(`{"uidMappings":[{"hostId":131072,"containerId":0,"length":65536}],`+
		`"gidMappings":[{"hostId":131072,"containerId":0,"length":65536}]}`), 0o600)
	a, err := New(h.cfg, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	if first, ok := a.userns.Holds("gone-uid"); !ok || first != 131072 {
		t.Fatalf("the orphan's range is not held at start: %d %v", first, ok)
	}
	a.conn.Close()

	h.write("classes.yaml", "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: userns}\nhandler: fake\n")
	h.write("plain.yaml", fmt.Sprintf(manifest, "plain", "busybox:1")+"  hostUsers: false\n")
	h.write("isolated.yaml", fmt.Sprintf(manifest, "isolated", "busybox:1")+"  hostUsers: false\n  runtimeClassName: userns\n")
	h.start(Deps{})
	h.eventually("isolated running", func() bool { return len(h.running()) == 1 })
	h.eventually("the orphan's range freed", func() bool { _, ok := h.agent.userns.Holds("gone-uid"); return !ok })

	var uid types.UID
	for _, p := range h.agent.PodState().Pods() {
		if p.Name == "isolated-node1" {
			uid = p.UID
		}
	}
	first, ok := h.agent.userns.Holds(uid)
	if !ok || first < 65536 || first%65536 != 0 {
		t.Fatalf("isolated holds %d %v", first, ok)
	}
	b, err := os.ReadFile(filepath.Join(h.cfg.RootDir, "pods", string(uid), "userns"))
	if err != nil || !strings.Contains(string(b), fmt.Sprintf(`"hostId":%d,`, first)) {
		t.Fatalf("checkpoint %s %v", b, err)
	}
	want := "can't set `spec.hostUsers: false`, runtime does not support user namespaces"
	h.eventually("plain refused", func() bool {
		for _, e := range h.agent.events.PodEvents("default", "plain-node1") {
			if e.Type == v1.EventTypeWarning && e.Reason == "FailedCreatePodSandBox" && e.Message == "Failed to create pod sandbox: "+want {
				return true
			}
		}
		return false
	})
	// As the kubelet shows it: Pending, the container waiting in ContainerCreating.
	h.eventually("plain Pending, its container creating", func() bool {
		for _, p := range h.agent.PodState().Pods() {
			if p.Name == "plain-node1" {
				cs := p.Status.ContainerStatuses
				return p.Status.Phase == v1.PodPending && len(cs) == 1 && cs[0].State.Waiting != nil &&
					cs[0].State.Waiting.Reason == "ContainerCreating"
			}
		}
		return false
	})
	if n := len(h.cri.Sandboxes()); n != 1 {
		t.Fatalf("%d sandboxes, want only isolated's", n)
	}

	os.Remove(filepath.Join(h.dir, "isolated.yaml"))
	h.eventually("isolated's range freed", func() bool { _, ok := h.agent.userns.Holds(uid); return !ok })
	h.eventually("isolated's folder gone", func() bool {
		_, err := os.Stat(filepath.Join(h.cfg.RootDir, "pods", string(uid)))
		return errors.Is(err, os.ErrNotExist)
	})
}
