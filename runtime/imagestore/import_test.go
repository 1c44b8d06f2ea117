package imagestore

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestImportDockerArchive(t *testing.T) {
	img := twoLayerImage(t, "imported")
	tag, _ := name.NewTag("registry.example/app/one:2")
	file := filepath.Join(t.TempDir(), "img.tar")
	if err := tarball.WriteToFile(file, tag, img); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, t.TempDir())
	imgs, err := s.Import(ctxT(t), file)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.ConfigName()
	if len(imgs) != 1 || imgs[0].ID != want.String() || !slices.Equal(imgs[0].RepoTags, []string{"registry.example/app/one:2"}) {
		t.Fatalf("imported %+v", imgs)
	}
	// The same archive gzipped (docker save | gzip) imports too.
	gzFile := file + ".gz"
	raw, _ := os.ReadFile(file)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(raw)
	zw.Close()
	os.WriteFile(gzFile, gz.Bytes(), 0o600)
	if imgs, err := openStore(t, t.TempDir()).Import(ctxT(t), gzFile); err != nil || len(imgs) != 1 || imgs[0].ID != want.String() {
		t.Fatalf("gzipped archive: %v %v", imgs, err)
	}
	if _, err := s.PrepareRootfs(ctxT(t), "imp", "registry.example/app/one:2"); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveRootfs(ctxT(t), "imp"); err != nil {
		t.Fatal(err)
	}
}

func TestImportOCILayout(t *testing.T) {
	img := twoLayerImage(t, "oci")
	dir := t.TempDir()
	idx := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
		Annotations: map[string]string{"org.opencontainers.image.ref.name": "example.org/tools/oci:v1"}}})
	if _, err := layout.Write(dir, idx); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "oci.tar")
	tarDir(t, dir, file)
	s := openStore(t, t.TempDir())
	imgs, err := s.Import(ctxT(t), file)
	if err != nil {
		t.Fatal(err)
	}
	if len(imgs) != 1 || !slices.Equal(imgs[0].RepoTags, []string{"example.org/tools/oci:v1"}) {
		t.Fatalf("imported %+v", imgs)
	}
	// Neither format: a clear error.
	bogus := filepath.Join(t.TempDir(), "bogus.tar")
	os.WriteFile(bogus, tarOf(t, file0("hello")), 0o600)
	if _, err := s.Import(ctxT(t), bogus); err == nil {
		t.Fatal("imported a tarball that is no image")
	}
}

func file0(body string) entry { return file("hello.txt", body) }

func tarDir(t *testing.T, dir, out string) {
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		h, _ := tar.FileInfoHeader(fi, "")
		h.Name = rel
		tw.WriteHeader(h)
		if fi.Mode().IsRegular() {
			src, _ := os.Open(p)
			io.Copy(tw, src)
			src.Close()
		}
		return nil
	})
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}
