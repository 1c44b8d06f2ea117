package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodelet/nodelet/agent/images"
)

// A pod deleted while the agent was away leaves its folder; housekeeping removes it once every
// source has spoken, and keeps the folder of a pod that runs.
func TestOrphanedPodFoldersRemoved(t *testing.T) {
	h := newHarness(t)
	orphan := filepath.Join(h.cfg.RootDir, "pods", "gone-uid", "volumes", "kubernetes.io~empty-dir", "data")
	if err := os.MkdirAll(orphan, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(orphan, "f"), []byte("x"), 0o644)
	h.write("web.yaml", fmt.Sprintf(manifest, "web", "busybox:1")+`    volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, emptyDir: {}}]
`)
	h.start(Deps{ContainerGCPeriod: 20 * time.Millisecond, ImageGCPeriod: 20 * time.Millisecond})
	h.eventually("web running", func() bool { return len(h.running()) == 1 })
	h.eventually("orphan folder removed", func() bool {
		_, err := os.Stat(filepath.Join(h.cfg.RootDir, "pods", "gone-uid"))
		return errors.Is(err, os.ErrNotExist)
	})
	entries, err := os.ReadDir(filepath.Join(h.cfg.RootDir, "pods"))
	if err != nil || len(entries) != 1 {
		t.Fatalf("pod folders %v, %v: want the running pod's", entries, err)
	}
}

type reasonRecorder struct{ reasons []string }

func (r *reasonRecorder) Eventf(_ runtime.Object, _, reason, _ string, _ ...any) {
	r.reasons = append(r.reasons, reason)
}

// A collection that cannot free enough says so on the node each time; ImageGCFailed needs two
// failures in a row, and a success in between starts counting again.
func TestImageGCFailuresBecomeNodeEvents(t *testing.T) {
	r := &reasonRecorder{}
	o := imageGCOutcome{node: &v1.ObjectReference{Kind: "Node", Name: "n"}, recorder: r}
	short := fmt.Errorf("%w: wanted 10 bytes, freed 2", images.ErrNotEnoughFreed)
	o.record(short)
	o.record(nil)
	o.record(errors.New("image service unavailable"))
	o.record(short)
	want := "FreeDiskSpaceFailed FreeDiskSpaceFailed ImageGCFailed"
	if got := fmt.Sprint(r.reasons); got != "["+want+"]" {
		t.Errorf("events = %s, want [%s]", got, want)
	}
}
