package imagestore

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/compression"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

// entry is one tar entry of a crafted layer.
type entry struct {
	name     string
	typ      byte
	body     string
	link     string
	mode     int64
	uid, gid int
	major    int64
	minor    int64
	xattrs   map[string]string
}

func file(name, body string) entry {
	return entry{name: name, typ: tar.TypeReg, body: body, mode: 0o644}
}
func dir(name string) entry { return entry{name: name, typ: tar.TypeDir, mode: 0o755} }
func symlink(name, target string) entry {
	return entry{name: name, typ: tar.TypeSymlink, link: target, mode: 0o777}
}
func hardlink(name, target string) entry {
	return entry{name: name, typ: tar.TypeLink, link: target, mode: 0o644}
}

// tarOf builds an uncompressed layer tar.
func tarOf(t testing.TB, ents ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			Devmajor: e.major, Devminor: e.minor, ModTime: time.Unix(1700000000, 0), Format: tar.FormatPAX}
		if e.typ == tar.TypeReg {
			h.Size = int64(len(e.body))
		}
		if len(e.xattrs) > 0 {
			h.PAXRecords = map[string]string{}
			for k, v := range e.xattrs {
				h.PAXRecords["SCHILY.xattr."+k] = v
			}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			tw.Write([]byte(e.body))
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// busyboxTar is a layer with /bin/busybox (busybox-static) and /bin/sh linking to it.
func busyboxTar(t testing.TB) []byte {
	t.Helper()
	testutil.Require(t, "busybox")
	b, err := os.ReadFile(testutil.LookPath("busybox"))
	if err != nil {
		t.Fatal(err)
	}
	return tarOf(t, dir("bin"), entry{name: "bin/busybox", typ: tar.TypeReg, body: string(b), mode: 0o755},
		symlink("bin/sh", "busybox"), dir("etc"), file("etc/hostname", "image\n"))
}

func layerOf(t testing.TB, tarBytes []byte, comp compression.Compression) v1.Layer {
	t.Helper()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(tarBytes)), nil
	}, tarball.WithCompression(comp))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// imageOf builds an image from layer tars (gzip), with cfg edits applied to its config.
func imageOf(t testing.TB, tars [][]byte, edit func(*v1.Config)) v1.Image {
	t.Helper()
	var ls []v1.Layer
	for _, b := range tars {
		ls = append(ls, layerOf(t, b, compression.GZip))
	}
	return imageOfLayers(t, ls, edit)
}

func imageOfLayers(t testing.TB, ls []v1.Layer, edit func(*v1.Config)) v1.Image {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, ls...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Cmd = []string{"/bin/sh"}
	if edit != nil {
		edit(&cf.Config)
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// testRegistry is an in-process registry on loopback.
type testRegistry struct {
	srv  *httptest.Server
	host string
	// hook, if set, sees every request first and may answer it itself (returning true), to count
	// requests or serve corrupt, truncated or missing blobs.
	hook func(w http.ResponseWriter, r *http.Request) bool
}

func newRegistry(t testing.TB, useTLS bool, user, pass string) *testRegistry {
	t.Helper()
	tr := &testRegistry{}
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user != "" {
			u, p, ok := r.BasicAuth()
			if !ok || u != user || p != pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		if tr.hook != nil && tr.hook(w, r) {
			return
		}
		reg.ServeHTTP(w, r)
	})
	if useTLS {
		tr.srv = httptest.NewTLSServer(h)
	} else {
		tr.srv = httptest.NewServer(h)
	}
	t.Cleanup(tr.srv.Close)
	tr.host = strings.TrimPrefix(strings.TrimPrefix(tr.srv.URL, "http://"), "https://")
	return tr
}

// caFile writes the registry's certificate as a PEM file.
func (r *testRegistry) caFile(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "ca.pem")
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw})
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func (r *testRegistry) push(t testing.TB, ref string, img v1.Image, opts ...remote.Option) string {
	t.Helper()
	full := r.host + "/" + ref
	nr, err := name.ParseReference(full)
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, remote.WithTransport(r.srv.Client().Transport))
	if err := remote.Write(nr, img, opts...); err != nil {
		t.Fatalf("push %s: %v", full, err)
	}
	return full
}

func basicAuth(u, p string) remote.Option {
	return remote.WithAuth(authn.FromConfig(authn.AuthConfig{Username: u, Password: p}))
}

// rawManifest pushes arbitrary manifest bytes, for manifests the image builders refuse to make.
type rawManifest struct {
	body []byte
	mt   types.MediaType
}

func (m rawManifest) RawManifest() ([]byte, error)        { return m.body, nil }
func (m rawManifest) MediaType() (types.MediaType, error) { return m.mt, nil }

// sandbox is a test's directory with the store inside it and a canary beside it, so a test can
// prove an image wrote nothing outside the store.
type sandbox struct {
	base, store string
	before      map[string]string
}

func newSandbox(t testing.TB) *sandbox {
	t.Helper()
	base := t.TempDir()
	sb := &sandbox{base: base, store: filepath.Join(base, "store")}
	os.MkdirAll(filepath.Join(base, "outside", "etc"), 0o755)
	os.WriteFile(filepath.Join(base, "outside", "etc", "passwd"), []byte("root:x:0:0\n"), 0o644)
	os.WriteFile(filepath.Join(base, "outside", "x"), []byte("keep\n"), 0o644)
	sb.before = snapshot(t, base, filepath.Join(base, "store"))
	testutil.CheckNoLeaks(t, base)
	return sb
}

// snapshot maps every path under base (except skip) to its mode and content digest.
func snapshot(t testing.TB, base, skip string) map[string]string {
	out := map[string]string{}
	filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		// The store, and the stores of subtests beside it, may change freely.
		if strings.HasPrefix(p, skip) {
			return filepath.SkipDir
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil
		}
		v := fi.Mode().String()
		if fi.Mode().IsRegular() {
			b, _ := os.ReadFile(p)
			h := sha256.Sum256(b)
			v += " " + hex.EncodeToString(h[:])
		}
		out[p] = v
		return nil
	})
	return out
}

// checkOutside fails if anything under the sandbox but outside the store changed, or if any of
// the absolute host paths exist.
func (sb *sandbox) checkOutside(t testing.TB, hostPaths ...string) {
	t.Helper()
	after := snapshot(t, sb.base, filepath.Join(sb.base, "store"))
	var diffs []string
	for p, v := range after {
		if sb.before[p] != v {
			diffs = append(diffs, "changed/created "+p)
		}
	}
	for p := range sb.before {
		if _, ok := after[p]; !ok {
			diffs = append(diffs, "removed "+p)
		}
	}
	for _, p := range hostPaths {
		if _, err := os.Lstat(p); err == nil {
			diffs = append(diffs, "host path created "+p)
			os.RemoveAll(p)
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Fatalf("image reached outside the store:\n%s", strings.Join(diffs, "\n"))
	}
}

func openStore(t testing.TB, dir string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(dir, append([]Option{WithLogger(slog.New(slog.DiscardHandler))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
