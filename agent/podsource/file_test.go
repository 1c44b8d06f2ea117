package podsource

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
)

// A re-read parses only the files whose bytes changed, and hands on fresh copies: what the
// receiver does to one read's pods never shows in the next.
func TestReadParsesOnlyChangedFiles(t *testing.T) {
	parsed := 0
	defer func(f func([]byte) ([]*v1.Pod, []*nodev1.RuntimeClass, error)) { decodeAll = f }(decodeAll)
	orig := decodeAll
	decodeAll = func(b []byte) ([]*v1.Pod, []*nodev1.RuntimeClass, error) { parsed++; return orig(b) }

	dir := t.TempDir()
	write := func(name, image string) {
		t.Helper()
		m := "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name + "}\nspec:\n  containers: [{name: c, image: " + image + "}]\n"
		if err := os.WriteFile(filepath.Join(dir, name+".yaml"), []byte(m), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a", "busybox:1")
	write("b", "busybox:1")
	s := &ManifestDirSource{Path: dir, NodeName: "n", Log: slog.New(slog.DiscardHandler)}
	first := s.read()
	if len(first) != 2 || parsed != 2 {
		t.Fatalf("first read: %d pods, %d files parsed", len(first), parsed)
	}
	first[0].Spec.Containers[0].Image = "changed-by-receiver"
	second := s.read()
	if parsed != 2 {
		t.Errorf("unchanged files parsed again: %d parses", parsed)
	}
	if second[0].Spec.Containers[0].Image != "busybox:1" || second[0] == first[0] {
		t.Errorf("second read shares the first's pod: image %q", second[0].Spec.Containers[0].Image)
	}
	write("b", "busybox:2") // same size, likely the same mtime: the bytes decide
	third := s.read()
	if parsed != 3 || third[1].Spec.Containers[0].Image != "busybox:2" {
		t.Errorf("changed file: %d parses, image %q", parsed, third[1].Spec.Containers[0].Image)
	}
}
