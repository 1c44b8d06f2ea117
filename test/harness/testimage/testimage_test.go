package testimage

import (
	"archive/tar"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

// entry is one file of an image's flattened filesystem.
type entry struct {
	hdr  *tar.Header
	data string
}

func TestBusyboxConfigAndFiles(t *testing.T) {
	testutil.Require(t, "busybox")
	img, err := Busybox(
		WithUsers(User{Name: "www-data", UID: 33, GID: 33}),
		WithGroups(Group{Name: "extra", GID: 50000, Members: []string{"www-data"}}),
		WithUser("www-data"),
		WithEntrypoint("/bin/sh", "-c"),
		WithCmd("echo hi"),
		WithEnv("FOO=bar"),
		WithWorkdir("/srv"),
		WithExposedPorts("80", "53/udp"),
		WithLabels(map[string]string{"a": "b"}),
		WithFile("/etc/marker", "hello\n", 0o644),
		WithFile("/usr/local/bin/suid", "#!/bin/sh\n", 0o755|os.ModeSetuid),
		WithSymlink("/etc/link", "marker"),
		WithLayers(2, 1024),
	)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "www-data" || !slices.Equal(c.Entrypoint, []string{"/bin/sh", "-c"}) ||
		!slices.Equal(c.Cmd, []string{"echo hi"}) || c.WorkingDir != "/srv" || c.Labels["a"] != "b" {
		t.Errorf("config = %+v", c)
	}
	if !slices.Contains(c.Env, "FOO=bar") || !strings.HasPrefix(c.Env[0], "PATH=") {
		t.Errorf("env = %v", c.Env)
	}
	if _, ok := c.ExposedPorts["80/tcp"]; !ok {
		t.Errorf("exposed ports = %v", c.ExposedPorts)
	}
	if _, ok := c.ExposedPorts["53/udp"]; !ok {
		t.Errorf("exposed ports = %v", c.ExposedPorts)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 4 { // base, files, 2 extra
		t.Errorf("layers = %d, want 4", len(layers))
	}
	if len(cf.RootFS.DiffIDs) != 4 {
		t.Errorf("diff IDs = %d, want 4", len(cf.RootFS.DiffIDs))
	}

	fs := readFS(t, img)
	for name, want := range map[string]string{
		"etc/marker": "hello\n",
	} {
		if got := fs[name]; got.data != want {
			t.Errorf("%s = %q, want %q", name, got.data, want)
		}
	}
	if !strings.Contains(fs["etc/passwd"].data, "www-data:x:33:33:") {
		t.Errorf("passwd = %q", fs["etc/passwd"].data)
	}
	if !strings.Contains(fs["etc/group"].data, "extra:x:50000:www-data\n") ||
		!strings.Contains(fs["etc/group"].data, "www-data:x:33:\n") {
		t.Errorf("group = %q", fs["etc/group"].data)
	}
	if h := fs["usr/local/bin/suid"].hdr; h == nil || h.Mode&0o4000 == 0 {
		t.Errorf("suid entry = %+v", h)
	}
	if h := fs["etc/link"].hdr; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "marker" {
		t.Errorf("symlink entry = %+v", h)
	}
	if h := fs["bin/sh"].hdr; h == nil || h.Typeflag != tar.TypeLink || h.Linkname != "bin/busybox" {
		t.Errorf("bin/sh = %+v, want a hard link to bin/busybox", h)
	}
	if h := fs["tmp"].hdr; h == nil || h.Mode&0o1777 != 0o1777 {
		t.Errorf("tmp = %+v", h)
	}
	if h := fs["srv"].hdr; h == nil || h.Typeflag != tar.TypeDir {
		t.Errorf("workdir = %+v", h)
	}
	if len(fs["layers/1"].data) != 1024 {
		t.Errorf("layers/1 has %d bytes", len(fs["layers/1"].data))
	}
}

func TestBusyboxIsDeterministic(t *testing.T) {
	testutil.Require(t, "busybox")
	opts := []Option{WithFile("/a", "a", 0o644), WithLayers(1, 100), WithCmd("true")}
	a, b := MustBusybox(opts...), MustBusybox(opts...)
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("digests differ: %s %s", da, db)
	}
	c := MustBusybox(WithFile("/a", "b", 0o644))
	if dc, _ := c.Digest(); dc == da {
		t.Errorf("different content, same digest %s", dc)
	}
}

func TestWithoutBusybox(t *testing.T) {
	img := MustBusybox(WithoutBusybox(), WithFile("/pause", "x", 0o755), WithEntrypoint("/pause"))
	fs := readFS(t, img)
	if _, ok := fs["bin/busybox"]; ok {
		t.Error("bin/busybox present")
	}
	if fs["pause"].data != "x" {
		t.Errorf("pause = %+v", fs["pause"])
	}
	cf, _ := img.ConfigFile()
	if cf.Config.Cmd != nil {
		t.Errorf("cmd = %v, want none", cf.Config.Cmd)
	}
}

func TestEnvRejectsMalformed(t *testing.T) {
	if _, err := Busybox(WithoutBusybox(), WithEnv("NOEQUALS")); err == nil {
		t.Error("want an error for an env entry without =")
	}
}

// TestImagesRun unpacks the images into directories and runs a shell in them with chroot: the
// static and the dynamic busybox must both work with what the image holds and nothing else.
func TestImagesRun(t *testing.T) {
	testutil.Require(t, "busybox", "chroot", "ipcs", "pgrep")
	if _, err := dynamicBusybox(); err != nil {
		t.Fatal(err)
	}
	const script = "id -u; wget --help 2>&1 | head -1"
	for _, tc := range []struct {
		name   string
		opts   []Option
		script string
		want   string
	}{
		{"static", nil, script, "BusyBox"},
		{"dynamic", []Option{WithDynamicBusybox()}, script, "BusyBox"},
		{"static with host ipcs", []Option{WithHostBinary(testutil.LookPath("ipcs"), "/usr/bin/ipcs")},
			"id -u; ipcs -m", "Shared Memory"},
		{"dynamic with host pgrep", []Option{WithDynamicBusybox(), WithHostBinary(testutil.LookPath("pgrep"), "/usr/bin/pgrep")},
			"id -u; pgrep -l pgrep || echo none", "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			extract(t, MustBusybox(tc.opts...), dir)
			out, err := exec.Command("chroot", dir, "/bin/sh", "-c", tc.script).CombinedOutput()
			if err != nil {
				t.Fatalf("chroot: %v: %s", err, out)
			}
			if !strings.HasPrefix(string(out), "0\n") || !strings.Contains(string(out), tc.want) {
				t.Errorf("output %q, want it to contain %q", out, tc.want)
			}
		})
	}
}

func TestServe(t *testing.T) {
	testutil.Require(t, "busybox")
	img := MustBusybox(WithFile("/x", "y", 0o644))
	host := Serve(t, map[string]v1.Image{"e2e-test-images/busybox:1.29-2": img})
	ref, err := Ref(host, "e2e-test-images/busybox:1.29-2")
	if err != nil {
		t.Fatal(err)
	}
	got, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	dg, _ := got.Digest()
	dw, _ := img.Digest()
	if dg != dw {
		t.Errorf("pulled %s, pushed %s", dg, dw)
	}
}

func TestRepoPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"registry.k8s.io/pause:3.9", "pause:3.9"},
		{"registry.k8s.io/e2e-test-images/busybox:1.29-2", "e2e-test-images/busybox:1.29-2"},
		{"busybox", "library/busybox:latest"},
		{"public.ecr.aws/docker/library/busybox:latest", "docker/library/busybox:latest"},
		{"gcr.io/k8s-staging-cri-tools/test-image-latest", "k8s-staging-cri-tools/test-image-latest:latest"},
	} {
		got, err := RepoPath(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("RepoPath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	if _, err := RepoPath("x@sha256:9700f9a2f5bf2c45f2f605a0bd3bce7cf37420ec9d3ed50ac2758413308766bf"); err == nil {
		t.Error("want an error for a digest reference")
	}
}

func readFS(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	fs := map[string]entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return fs
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		fs[strings.TrimSuffix(h.Name, "/")] = entry{hdr: h, data: string(data)}
	}
}

// extract writes an image's filesystem to dir; test images are trusted, so no path checks.
func extract(t *testing.T, img v1.Image, dir string) {
	t.Helper()
	fs := readFS(t, img)
	names := make([]string, 0, len(fs))
	for n := range fs {
		names = append(names, n)
	}
	slices.Sort(names)
	var links []string
	for _, n := range names {
		e, p := fs[n], filepath.Join(dir, n)
		switch e.hdr.Typeflag {
		case tar.TypeDir:
			must(t, os.MkdirAll(p, os.FileMode(e.hdr.Mode)&os.ModePerm))
		case tar.TypeReg:
			must(t, os.MkdirAll(filepath.Dir(p), 0o755))
			must(t, os.WriteFile(p, []byte(e.data), os.FileMode(e.hdr.Mode)&os.ModePerm))
		case tar.TypeSymlink:
			must(t, os.MkdirAll(filepath.Dir(p), 0o755))
			must(t, os.Symlink(e.hdr.Linkname, p))
		case tar.TypeLink:
			links = append(links, n)
		}
	}
	for _, n := range links {
		p := filepath.Join(dir, n)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.Link(filepath.Join(dir, fs[n].hdr.Linkname), p))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
