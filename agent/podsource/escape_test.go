package podsource

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/manifest"
)

// errorLog records the errors a source reports, by file or URL.
type errorLog struct {
	mu   sync.Mutex
	errs map[string]error
	ch   chan struct{}
}

func newErrorLog() *errorLog {
	return &errorLog{errs: map[string]error{}, ch: make(chan struct{}, 100)}
}

func (l *errorLog) record(where string, err error) {
	l.mu.Lock()
	l.errs[filepath.Base(where)] = err
	l.mu.Unlock()
	select {
	case l.ch <- struct{}{}:
	default:
	}
}

// waitFor waits until where has reported an error; the timeout only guards against a hang.
func (l *errorLog) waitFor(t *testing.T, where string) error {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		l.mu.Lock()
		err, ok := l.errs[where]
		l.mu.Unlock()
		if ok {
			return err
		}
		select {
		case <-l.ch:
		case <-deadline:
			t.Fatalf("no error reported for %s", where)
		}
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runDirSource starts a file source on dir and returns a stop function that fails the test
// unless Run returns once its context is cancelled.
func runDirSource(t *testing.T, dir string, r *recorder, l *errorLog) (stop func()) {
	t.Helper()
	s := &ManifestDirSource{Path: dir, NodeName: "node1", Set: r.set, Errors: l.record}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	return func() {
		t.Helper()
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("the file source's Run did not return after its context was cancelled")
		}
	}
}

func onlyGood(p []*v1.Pod) bool { return len(p) == 1 && p[0].Name == "good-node1" }

// A static pod whose uid or volume name walks out of the agent's root dir is refused before any
// of it becomes a path: the decoy directory beside the root stays as it was.
func TestManifestDirSourceRefusesPathEscapes(t *testing.T) {
	tests := []struct {
		name, manifest, field string
	}{
		{"uid", `apiVersion: v1
kind: Pod
metadata: {name: evil, uid: ../../../decoy}
spec:
  containers: [{name: app, image: busybox:1}]
`, `metadata.uid: Invalid value: "../../../decoy"`},
		{"emptyDir name", `apiVersion: v1
kind: Pod
metadata: {name: evil}
spec:
  volumes: [{name: ../../../../../../decoy, emptyDir: {}}]
  containers: [{name: app, image: busybox:1, volumeMounts: [{name: ../../../../../../decoy, mountPath: /x}]}]
`, `spec.volumes[0].name: Invalid value: "../../../../../../decoy"`},
		{"container name", `apiVersion: v1
kind: Pod
metadata: {name: evil}
spec:
  containers: [{name: ../../decoy, image: busybox:1}]
`, `spec.containers[0].name: Invalid value: "../../decoy"`},
		{"configMap item path", `apiVersion: v1
kind: Pod
metadata: {name: evil}
spec:
  volumes: [{name: cfg, configMap: {name: cfg, items: [{key: k, path: ../../../decoy/owned}]}}]
  containers: [{name: app, image: busybox:1}]
`, `spec.volumes[0].configMap.items[0].path: Invalid value: "../../../decoy/owned"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			manifests := filepath.Join(base, "root", "manifests")
			decoy := filepath.Join(base, "decoy")
			for _, d := range []string{manifests, decoy} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			writeFile(t, filepath.Join(decoy, "keep"), "precious")
			writeFile(t, filepath.Join(manifests, "evil.yaml"), tt.manifest)
			writeFile(t, filepath.Join(manifests, "good.yaml"), fmt.Sprintf(podYAML, "good", "busybox:1"))

			r := &recorder{ch: make(chan struct{}, 10)}
			l := newErrorLog()
			stop := runDirSource(t, manifests, r, l)
			defer stop()
			r.waitFor(t, "only the good pod", onlyGood)
			err := l.waitFor(t, "evil.yaml")
			if !errors.Is(err, manifest.ErrInvalidPod) || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("error %v, want manifest.ErrInvalidPod naming %s", err, tt.field)
			}
			if b, err := os.ReadFile(filepath.Join(decoy, "keep")); err != nil || string(b) != "precious" {
				t.Fatalf("decoy touched: %q, %v", b, err)
			}
		})
	}
}
