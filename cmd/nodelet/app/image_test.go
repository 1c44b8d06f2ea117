package app

import (
	"archive/tar"
	"bytes"
	"io"
	"log"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func tinyImage(t *testing.T, body string) v1.Image {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "hello", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))})
	tw.Write([]byte(body))
	tw.Close()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		t.Fatal(err)
	}
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	img, _ = mutate.ConfigFile(img, cf)
	return img
}

func runImageCmd(t *testing.T, args ...string) (string, error) {
	cmd := newImageCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestImageCmdImportPullListRemove(t *testing.T) {
	old := global.root
	global.root = t.TempDir()
	t.Cleanup(func() { global.root = old })

	archive := filepath.Join(t.TempDir(), "img.tar")
	tag, _ := name.NewTag("example.org/demo/app:1")
	if err := tarball.WriteToFile(archive, tag, tinyImage(t, "imported")); err != nil {
		t.Fatal(err)
	}
	out, err := runImageCmd(t, "import", archive)
	if err != nil || !strings.Contains(out, "example.org/demo/app:1") {
		t.Fatalf("import: %q %v", out, err)
	}

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	ref := strings.TrimPrefix(srv.URL, "http://") + "/demo/pulled:2"
	r, _ := name.ParseReference(ref)
	if err := remote.Write(r, tinyImage(t, "pulled")); err != nil {
		t.Fatal(err)
	}
	if out, err := runImageCmd(t, "pull", ref); err != nil || !strings.HasPrefix(out, "sha256:") {
		t.Fatalf("pull: %q %v", out, err)
	}
	// Through a mirror: a name on a registry that does not exist, served by the loopback one.
	if out, err := runImageCmd(t, "pull", "--registry-mirror", "registry.invalid="+srv.URL, "registry.invalid/demo/pulled:2"); err != nil {
		t.Fatalf("pull through mirror: %q %v", out, err)
	}

	out, err = runImageCmd(t, "ls")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"example.org/demo/app", "demo/pulled", "registry.invalid/demo/pulled", "IMAGE ID"} {
		if !strings.Contains(out, want) {
			t.Errorf("ls output lacks %q:\n%s", want, out)
		}
	}
	if _, err := runImageCmd(t, "rm", "example.org/demo/app:1", ref); err != nil {
		t.Fatal(err)
	}
	if _, err := runImageCmd(t, "rm", "example.org/demo/app:1"); err == nil {
		t.Fatal("removing a missing image succeeded")
	}
	out, _ = runImageCmd(t, "ls", "-q")
	if strings.TrimSpace(out) != "" {
		t.Fatalf("images left: %q", out)
	}
}
