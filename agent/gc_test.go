package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
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
