package imagestore

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/compression"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodelet/nodelet/test/harness/testutil"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// Every test here feeds the store one hostile image and checks that the result is a clear error or
// a harmless layer, and that nothing outside the store was created or changed.

func hostPath(t *testing.T, prefix string) string {
	var b [6]byte
	rand.Read(b[:])
	p := filepath.Join(os.TempDir(), prefix+hex.EncodeToString(b[:]))
	t.Cleanup(func() { os.RemoveAll(p) })
	return p
}

// pullHostile pushes an image made of the given layer tars and pulls it into the sandbox's store.
func pullHostile(t *testing.T, sb *sandbox, tars ...[]byte) (*Store, *Image, error) {
	t.Helper()
	reg := newRegistry(t, false, "", "")
	full := reg.push(t, "hostile/img:1", imageOf(t, tars, nil))
	s := openStore(t, sb.store)
	img, err := s.Pull(ctxT(t), full, PullOptions{})
	return s, img, err
}

func expectRefused(t *testing.T, s *Store, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("hostile image was accepted")
	}
	if !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Errorf("error %v should be InvalidArgument", err)
	}
	if imgs, _ := s.List(); len(imgs) != 0 {
		t.Errorf("hostile image is listed: %v", imgs)
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Root(), "layers")); len(ents) != 0 {
		t.Errorf("hostile layer kept: %v", ents)
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Root(), "tmp")); len(ents) != 0 {
		t.Errorf("tmp litter: %v", ents)
	}
	t.Logf("refused with: %v", err)
}

func TestHostileDotDotEntry(t *testing.T) {
	sb := newSandbox(t)
	escape := hostPath(t, "nodelet-dotdot-")
	rel := strings.Repeat("../", 30) + strings.TrimPrefix(escape, "/")
	s, _, err := pullHostile(t, sb, tarOf(t, file("ok", "1"), file(rel, "pwned"), file("../outside/x", "pwned")))
	expectRefused(t, s, err)
	sb.checkOutside(t, escape)
}

func TestHostileAbsolutePathStaysInsideLayer(t *testing.T) {
	sb := newSandbox(t)
	escape := hostPath(t, "nodelet-abs-")
	s, img, err := pullHostile(t, sb, tarOf(t, file(escape, "inside"), file(filepath.Join(sb.base, "outside", "x"), "pwned")))
	if err != nil {
		t.Fatalf("absolute names are read as relative to the layer, as Docker does: %v", err)
	}
	diff := filepath.Join(s.layerDir(img.Layers[0].ChainID), "diff")
	if b, err := os.ReadFile(filepath.Join(diff, escape)); err != nil || string(b) != "inside" {
		t.Fatalf("entry not under the layer: %q %v", b, err)
	}
	sb.checkOutside(t, escape)
}

func TestHostileSymlinkThenWriteThrough(t *testing.T) {
	sb := newSandbox(t)
	outside := filepath.Join(sb.base, "outside")
	escapeDir := hostPath(t, "nodelet-symdir-")
	for _, c := range []struct{ name, target string }{
		{"absolute", outside},
		{"relative", strings.Repeat("../", 30) + strings.TrimPrefix(outside, "/")},
		{"absolute-new", escapeDir},
	} {
		t.Run(c.name, func(t *testing.T) {
			sb := &sandbox{base: sb.base, store: filepath.Join(sb.base, "store-"+c.name), before: sb.before}
			s, img, err := pullHostile(t, sb, tarOf(t, symlink("evil", c.target), file("evil/x", "pwned"),
				file("evil/new", "pwned"), dir("evil/sub"), file("evil/sub/f", "pwned")))
			if err == nil {
				// A safe result is also acceptable: the write landed inside the layer.
				diff := filepath.Join(s.layerDir(img.Layers[0].ChainID), "diff")
				t.Logf("accepted; layer holds %v", listTree(diff))
			}
			sb.checkOutside(t, escapeDir)
		})
	}
	sb.checkOutside(t, escapeDir)
}

func listTree(root string) []string {
	var out []string
	filepath.Walk(root, func(p string, _ os.FileInfo, _ error) error {
		out = append(out, strings.TrimPrefix(p, root))
		return nil
	})
	return out
}

func TestHostileHardlinkToOutside(t *testing.T) {
	sb := newSandbox(t)
	passwd := filepath.Join(sb.base, "outside", "etc", "passwd")
	for _, c := range []struct{ name, target string }{
		{"relative", strings.Repeat("../", 30) + strings.TrimPrefix(passwd, "/")},
		{"absolute", passwd},
		{"via-symlink", "link/etc/passwd"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sb := &sandbox{base: sb.base, store: filepath.Join(sb.base, "store-"+c.name), before: sb.before}
			// Link, then write through the link: if the link reached the host file, the write would
			// truncate it.
			s, _, err := pullHostile(t, sb, tarOf(t, symlink("link", filepath.Join(sb.base, "outside")),
				hardlink("h", c.target), file("h", "pwned")))
			if err == nil {
				t.Log("accepted (the link could only name a file inside the layer)")
			} else {
				expectRefusedKeepingLayers(t, s, err)
			}
			sb.checkOutside(t)
		})
	}
	if b, _ := os.ReadFile(passwd); string(b) != "root:x:0:0\n" {
		t.Fatalf("outside file changed: %q", b)
	}
}

func expectRefusedKeepingLayers(t *testing.T, s *Store, err error) {
	t.Helper()
	if imgs, _ := s.List(); len(imgs) != 0 {
		t.Errorf("hostile image is listed: %v", imgs)
	}
	t.Logf("refused with: %v", err)
}

func TestHostileWhiteoutDotDot(t *testing.T) {
	sb := newSandbox(t)
	for i, name := range []string{"../.wh.x", "a/../../.wh.x", strings.Repeat("../", 30) + strings.TrimPrefix(filepath.Join(sb.base, "outside", ".wh.x"), "/"),
		"../.wh..wh..opq"} {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			sb := &sandbox{base: sb.base, store: filepath.Join(sb.base, "store-"+strconv.Itoa(i)), before: sb.before}
			s, _, err := pullHostile(t, sb, tarOf(t, dir("a"), file(name, "")))
			expectRefused(t, s, err)
			sb.checkOutside(t)
		})
	}
}

func TestHostileDeviceNodes(t *testing.T) {
	sb := newSandbox(t)
	mem := entry{name: "dev/mem", typ: tar.TypeChar, major: 1, minor: 1, mode: 0o666}
	sda := entry{name: "dev/sda", typ: tar.TypeBlock, major: 8, minor: 0, mode: 0o666}
	s, _, err := pullHostile(t, sb, busyboxTar(t), tarOf(t, dir("dev"), mem, sda))
	if err != nil {
		t.Fatal(err)
	}
	rf, err := s.PrepareRootfs(ctxT(t), "dev", "127.0.0.1/whatever") // wrong name first
	if err == nil {
		t.Fatal("prepared a rootfs for a missing image")
	}
	imgs, _ := s.List()
	rf, err = s.PrepareRootfs(ctxT(t), "dev", imgs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	defer s.RemoveRootfs(ctxT(t), "dev")
	// The rootfs is mounted nodev: an image's device nodes cannot be opened through it.
	for _, d := range []string{"dev/mem", "dev/sda"} {
		f, err := os.OpenFile(filepath.Join(rf.Path, d), os.O_RDONLY, 0)
		if err == nil {
			f.Close()
			t.Errorf("%s opened through the container rootfs", d)
		}
	}
	sb.checkOutside(t)
}

func TestHostileTruncatedLayer(t *testing.T) {
	sb := newSandbox(t)
	reg := newRegistry(t, false, "", "")
	img := imageOf(t, [][]byte{tarOf(t, file("big", strings.Repeat("x", 1<<20)))}, nil)
	full := reg.push(t, "hostile/trunc:1", img)
	ls, _ := img.Layers()
	d, _ := ls[0].Digest()
	blob, _ := ls[0].Compressed()
	var whole bytes.Buffer
	whole.ReadFrom(blob)
	reg.hook = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, d.String()) {
			w.Header().Set("Content-Length", strconv.Itoa(whole.Len()))
			w.Write(whole.Bytes()[:whole.Len()/2]) // then the connection ends short
			return true
		}
		return false
	}
	s := openStore(t, sb.store)
	_, err := s.Pull(ctxT(t), full, PullOptions{})
	if err == nil {
		t.Fatal("truncated layer accepted")
	}
	expectRefusedKeepingLayers(t, s, err)
	if ents, _ := os.ReadDir(filepath.Join(s.Root(), "layers")); len(ents) != 0 {
		t.Errorf("truncated layer kept: %v", ents)
	}
	sb.checkOutside(t)
}

func TestHostileWrongDigest(t *testing.T) {
	sb := newSandbox(t)
	reg := newRegistry(t, false, "", "")
	good := layerOf(t, tarOf(t, file("good", "fine!!")), compression.GZip)
	img := imageOfLayers(t, []v1.Layer{good}, nil)
	full := reg.push(t, "hostile/digest:1", img)
	d, _ := good.Digest()
	rc, _ := good.Compressed()
	var evilBytes bytes.Buffer
	evilBytes.ReadFrom(rc)
	// Same size, and it still decompresses to the very tar the config names (the byte is in the
	// gzip header's mtime), so only the blob digest check can catch it.
	evilBytes.Bytes()[5] ^= 0xff
	reg.hook = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, d.String()) {
			w.Write(evilBytes.Bytes())
			return true
		}
		return false
	}
	s := openStore(t, sb.store)
	_, err := s.Pull(ctxT(t), full, PullOptions{})
	if err == nil {
		t.Fatal("blob with the wrong digest accepted")
	}
	expectRefused(t, s, err)
	sb.checkOutside(t)
}

// pushRaw pushes a layer blob and then a hand-written manifest referring to it.
func pushRawManifest(t *testing.T, reg *testRegistry, ref string, edit func(*v1.Manifest)) string {
	img := imageOf(t, [][]byte{tarOf(t, file("f", strings.Repeat("y", 5000)))}, nil)
	full := reg.push(t, ref, img)
	mf, _ := img.Manifest()
	mf = mf.DeepCopy()
	edit(mf)
	b, _ := json.Marshal(mf)
	r, _ := name.ParseReference(full)
	if err := remote.Put(r, rawManifest{body: b, mt: types.DockerManifestSchema2}, remote.WithTransport(reg.srv.Client().Transport)); err != nil {
		t.Fatal(err)
	}
	return full
}

func TestHostileManifestBlobSizeMismatch(t *testing.T) {
	for _, delta := range []int64{-10, +10} {
		t.Run(strconv.FormatInt(delta, 10), func(t *testing.T) {
			sb := newSandbox(t)
			reg := newRegistry(t, false, "", "")
			full := pushRawManifest(t, reg, "hostile/size:1", func(m *v1.Manifest) { m.Layers[0].Size += delta })
			s := openStore(t, sb.store)
			_, err := s.Pull(ctxT(t), full, PullOptions{})
			if err == nil {
				t.Fatal("layer of the wrong size accepted")
			}
			expectRefusedKeepingLayers(t, s, err)
			if ents, _ := os.ReadDir(filepath.Join(s.Root(), "layers")); len(ents) != 0 {
				t.Errorf("layer kept: %v", ents)
			}
			sb.checkOutside(t)
		})
	}
}

func TestHostileConfigSizeMismatch(t *testing.T) {
	sb := newSandbox(t)
	reg := newRegistry(t, false, "", "")
	full := pushRawManifest(t, reg, "hostile/cfgsize:1", func(m *v1.Manifest) { m.Config.Size += 7 })
	s := openStore(t, sb.store)
	if _, err := s.Pull(ctxT(t), full, PullOptions{}); err == nil {
		t.Fatal("config of the wrong size accepted")
	} else {
		expectRefusedKeepingLayers(t, s, err)
	}
	sb.checkOutside(t)
}

func TestHostileDiffIDMismatch(t *testing.T) {
	sb := newSandbox(t)
	reg := newRegistry(t, false, "", "")
	img := imageOf(t, [][]byte{tarOf(t, file("a", "a"))}, nil)
	cf, _ := img.ConfigFile()
	cf = cf.DeepCopy()
	cf.RootFS.DiffIDs[0] = v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("ab", 32)}
	raw, _ := json.Marshal(cf)
	full := reg.push(t, "hostile/diffid:1", img)
	r, _ := name.ParseReference(full)
	mf, _ := img.Manifest()
	mf = mf.DeepCopy()
	mf.Config.Digest, mf.Config.Size, _ = v1.SHA256(bytes.NewReader(raw))
	if err := remote.WriteLayer(r.Context(), static.NewLayer(raw, types.DockerConfigJSON), remote.WithTransport(reg.srv.Client().Transport)); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(mf)
	if err := remote.Put(r, rawManifest{body: b, mt: types.DockerManifestSchema2}, remote.WithTransport(reg.srv.Client().Transport)); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, sb.store)
	_, err := s.Pull(ctxT(t), full, PullOptions{})
	expectRefused(t, s, err)
	sb.checkOutside(t)
}

func TestHostileConfigVolumes(t *testing.T) {
	testutil.Require(t, "busybox")
	sb := newSandbox(t)
	reg := newRegistry(t, false, "", "")
	img := imageOf(t, [][]byte{busyboxTar(t)},
		func(c *v1.Config) {
			c.Volumes = map[string]struct{}{"/../../etc": {}, "../../../x/y": {}, "/": {}, "/data": {}}
		})
	full := reg.push(t, "hostile/vols:1", img)
	s := openStore(t, sb.store)
	if _, err := s.Pull(ctxT(t), full, PullOptions{}); err != nil {
		t.Fatal(err)
	}
	rf, err := s.PrepareRootfs(ctxT(t), "vols", full)
	if err != nil {
		t.Fatal(err)
	}
	defer s.RemoveRootfs(ctxT(t), "vols")
	for v := range rf.Config.Volumes {
		if strings.Contains(v, "..") || !strings.HasPrefix(v, "/") {
			t.Errorf("volume %q is not a clean absolute path", v)
		}
	}
	for _, p := range []string{"etc", "x/y", "data"} {
		if fi, err := os.Stat(filepath.Join(rf.Path, p)); err != nil || !fi.IsDir() {
			t.Errorf("volume dir %s: %v", p, err)
		}
	}
	sb.checkOutside(t)
}

func TestHostileConfigVolumesThroughSymlinks(t *testing.T) {
	testutil.Require(t, "busybox")
	sb := newSandbox(t)
	outside := filepath.Join(sb.base, "outside")
	escape := hostPath(t, "nodelet-vol-")
	reg := newRegistry(t, false, "", "")
	for i, vol := range []string{"/link/pwned", "/rel/pwned", "/new/pwned", "/link"} {
		img := imageOf(t, [][]byte{busyboxTar(t), tarOf(t, symlink("link", outside),
			symlink("rel", strings.Repeat("../", 20)+strings.TrimPrefix(outside, "/")), symlink("new", escape))},
			func(c *v1.Config) { c.Volumes = map[string]struct{}{vol: {}} })
		full := reg.push(t, "hostile/symvols:"+strconv.Itoa(i), img)
		s := openStore(t, sb.store)
		if _, err := s.Pull(ctxT(t), full, PullOptions{}); err != nil {
			t.Fatal(err)
		}
		id := "symvol" + strconv.Itoa(i)
		rf, err := s.PrepareRootfs(ctxT(t), id, full)
		if err != nil {
			t.Logf("volume %s refused: %v", vol, err)
			if _, err := os.Stat(filepath.Join(s.Root(), "rootfs", id)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("refused rootfs left behind: %v", err)
			}
		} else {
			t.Logf("volume %s made inside the rootfs: %v", vol, rf.Config.Volumes)
			s.RemoveRootfs(ctxT(t), id)
		}
	}
	sb.checkOutside(t, escape)
}

func TestHostileHugeLayer(t *testing.T) {
	sb := newSandbox(t)
	reg := newRegistry(t, false, "", "")
	// 64 MiB of zeros gzip to about 64 KiB: a small download that unpacks big.
	bomb := tarOf(t, file("zeros", strings.Repeat("\x00", 64<<20)))
	full := reg.push(t, "hostile/bomb:1", imageOf(t, [][]byte{bomb}, nil))
	s := openStore(t, sb.store, WithMaxLayerSize(8<<20))
	_, err := s.Pull(ctxT(t), full, PullOptions{})
	if !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("got %v, want ResourceExhausted", err)
	}
	expectRefusedKeepingLayers(t, s, err)
	if ents, _ := os.ReadDir(filepath.Join(s.Root(), "tmp")); len(ents) != 0 {
		t.Errorf("tmp litter: %v", ents)
	}
	// A reserve larger than the free space refuses the same way.
	s = openStore(t, sb.store, WithDiskReserve(1<<62))
	if _, err := s.Pull(ctxT(t), full, PullOptions{}); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("got %v, want ResourceExhausted for lack of space", err)
	}
	sb.checkOutside(t)
}
