package volumemanager

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestDirObjects(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "pod.yaml"), []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "objects.yaml"), []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: site}
data: {index.html: hello}
---
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: prod}
data: {user: YWRtaW4=}
stringData: {pass: s3cret}
`), 0o644)
	os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte("{{{"), 0o644)
	d := &DirObjects{Dir: dir}
	ctx := context.Background()
	cm, err := d.ConfigMap(ctx, "default", "site")
	if err != nil || cm.Data["index.html"] != "hello" {
		t.Fatalf("config map %v %v", cm, err)
	}
	s, err := d.Secret(ctx, "prod", "creds")
	if err != nil || string(s.Data["user"]) != "admin" || string(s.Data["pass"]) != "s3cret" {
		t.Fatalf("secret %v %v", s, err)
	}
	if _, err := d.Secret(ctx, "default", "creds"); !apierrors.IsNotFound(err) {
		t.Fatalf("other namespace: %v", err)
	}
	if _, err := d.ConfigMap(ctx, "default", "web"); !apierrors.IsNotFound(err) {
		t.Fatalf("a pod is no config map: %v", err)
	}
	// Edits show at the next read.
	os.WriteFile(filepath.Join(dir, "objects.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: site}\ndata: {index.html: bye}\n"), 0o644)
	if cm, _ := d.ConfigMap(ctx, "default", "site"); cm == nil || cm.Data["index.html"] != "bye" {
		t.Fatalf("after edit: %v", cm)
	}
}

func TestResourceFieldValue(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{
		Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi"), v1.ResourceCPU: resource.MustParse("250m")},
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m")}}}}}}
	alloc := v1.ResourceList{v1.ResourceEphemeralStorage: resource.MustParse("10Gi")}
	cases := []struct {
		resource, divisor, want string
	}{
		{"limits.memory", "", "67108864"},
		{"limits.memory", "1Mi", "64"},
		{"limits.cpu", "", "1"},
		{"limits.cpu", "1m", "250"},
		{"requests.cpu", "1m", "100"},
		{"requests.memory", "", "0"},
		{"limits.ephemeral-storage", "1Gi", "10"},
	}
	for _, c := range cases {
		ref := &v1.ResourceFieldSelector{ContainerName: "app", Resource: c.resource}
		if c.divisor != "" {
			ref.Divisor = resource.MustParse(c.divisor)
		}
		got, err := ResourceFieldValue(pod, ref, alloc)
		if err != nil || got != c.want {
			t.Errorf("%s / %q = %q, %v; want %q", c.resource, c.divisor, got, err, c.want)
		}
	}
	if _, err := ResourceFieldValue(pod, &v1.ResourceFieldSelector{ContainerName: "nope", Resource: "limits.cpu"}, nil); err == nil {
		t.Error("unknown container accepted")
	}
}

func TestDirObjectsFromOneFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "all.yaml")
	os.WriteFile(f, []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {k: v}\n"), 0o644)
	cm, err := (&DirObjects{Dir: f}).ConfigMap(context.Background(), "default", "c")
	if err != nil || cm.Data["k"] != "v" {
		t.Fatalf("%v %v", cm, err)
	}
}

// A FIFO or a link to /dev/zero beside the manifests once wedged or grew every pod sync that read
// a ConfigMap; they are skipped now and the other files still serve their objects.
func TestDirObjectsSkipsHostileFiles(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.yaml")); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "objects.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: site}\ndata: {index.html: hello}\n"), 0o644)
	done := make(chan error, 1)
	go func() {
		cm, err := (&DirObjects{Dir: dir}).ConfigMap(context.Background(), "default", "site")
		if err == nil && cm.Data["index.html"] != "hello" {
			err = fmt.Errorf("config map %v", cm.Data)
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("reading the manifest folder blocked on a FIFO or an endless file")
	}
}

// A value's trailing newline survives the "---" after it, exactly as a YAML parser reads the
// document alone: quoted "\n", a block scalar (clip keeps one newline, keep all, strip none).
func TestDirObjectsKeepTrailingNewlines(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "objects.yaml"), []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: quoted}
data: {key: "line\n"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: clip}
data:
  key: |
    line
---
apiVersion: v1
kind: ConfigMap
metadata: {name: keep}
data:
  key: |+
    line

---
apiVersion: v1
kind: Secret
metadata: {name: strip}
stringData:
  key: |-
    line
--- # the last document, at the end of the file
apiVersion: v1
kind: ConfigMap
metadata: {name: last}
data:
  key: |
    line
`), 0o644)
	d := &DirObjects{Dir: dir}
	ctx := context.Background()
	for name, want := range map[string]string{"quoted": "line\n", "clip": "line\n", "keep": "line\n\n", "last": "line\n"} {
		cm, err := d.ConfigMap(ctx, "default", name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := cm.Data["key"]; got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	s, err := d.Secret(ctx, "default", "strip")
	if err != nil || string(s.Data["key"]) != "line" {
		t.Fatalf("strip: %q %v", s.Data["key"], err)
	}
}
