package imagestore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// TestPullRefusesOversizedDocuments serves manifests and configs above the caps: each pull must
// fail with ResourceExhausted before the oversized document is held, and store nothing.
func TestPullRefusesOversizedDocuments(t *testing.T) {
	reg := newRegistry(t, false, "", "")
	img := twoLayerImage(t, "docs")
	full := reg.push(t, "test/docs:1", img)
	mf, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	hugeConfig := *mf
	hugeConfig.Config.Size = 1 << 30
	hugeConfigBody, _ := json.Marshal(hugeConfig)
	padded := func(n int) []byte {
		// A valid manifest followed by blanks: still JSON, only too big.
		b, _ := json.Marshal(mf)
		return append(b, bytes.Repeat([]byte(" "), n-len(b))...)
	}
	var configFetches atomic.Int32
	tests := []struct {
		name  string
		serve func(w http.ResponseWriter)
	}{
		{name: "manifest with a large Content-Length", serve: func(w http.ResponseWriter) {
			body := padded(maxManifestBytes + 1)
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.Write(body)
		}},
		{name: "manifest without a length", serve: func(w http.ResponseWriter) {
			body := padded(2 * maxManifestBytes)
			for len(body) > 0 {
				n := min(len(body), 64<<10)
				w.Write(body[:n])
				w.(http.Flusher).Flush() // chunked: no Content-Length to refuse early
				body = body[n:]
			}
		}},
		{name: "config said to be 1 GiB", serve: func(w http.ResponseWriter) { w.Write(hugeConfigBody) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg.hook = func(w http.ResponseWriter, r *http.Request) bool {
				if strings.Contains(r.URL.Path, "/blobs/"+mf.Config.Digest.String()) {
					configFetches.Add(1)
				}
				if r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/manifests/") {
					return false
				}
				w.Header().Set("Content-Type", string(types.OCIManifestSchema1))
				tc.serve(w)
				return true
			}
			t.Cleanup(func() { reg.hook = nil })
			s := openStore(t, t.TempDir())
			_, err := s.Pull(ctxT(t), full, PullOptions{})
			if !errors.Is(err, errdefs.ErrResourceExhausted) || errdefs.Code(err) != codes.ResourceExhausted {
				t.Fatalf("pull: %v, want ResourceExhausted", err)
			}
			if n := configFetches.Load(); n != 0 {
				t.Fatalf("the config was fetched %d times", n)
			}
			if imgs, _ := s.List(); len(imgs) != 0 {
				t.Fatalf("images stored: %v", imgs)
			}
		})
	}
}

// TestPickPlatformChecksManifestSize refuses an index entry declaring a manifest above the cap
// before fetching it.
func TestPickPlatformChecksManifestSize(t *testing.T) {
	reg := newRegistry(t, false, "", "")
	idx := v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{{
		MediaType: types.OCIManifestSchema1, Size: maxManifestBytes + 1,
		Digest:   v1.Hash{Algorithm: "sha256", Hex: strings.Repeat("a", 64)},
		Platform: &v1.Platform{OS: "linux", Architecture: goruntime.GOARCH},
	}}}
	body, _ := json.Marshal(idx)
	reg.hook = func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.Contains(r.URL.Path, "/manifests/") {
			return false
		}
		if !strings.HasSuffix(r.URL.Path, "/manifests/1") {
			t.Errorf("fetched %s", r.URL.Path)
		}
		w.Header().Set("Content-Type", string(types.OCIImageIndex))
		w.Write(body)
		return true
	}
	s := openStore(t, t.TempDir())
	if _, err := s.Pull(ctxT(t), reg.host+"/test/index:1", PullOptions{}); !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("pull: %v, want ResourceExhausted", err)
	}
}

// mountSmallTmpfs mounts a tmpfs with few inodes for the test, unmounted when it ends.
func mountSmallTmpfs(t testing.TB, inodes int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "fs")
	mountTmpfs(t, dir, inodes)
	return dir
}

// mountTmpfs mounts a tmpfs of inodes inodes on dir (made if missing) until the test ends.
func mountTmpfs(t testing.TB, dir string, inodes int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=2g,nr_inodes=%d,mode=0700", inodes)); err != nil {
		t.Fatalf("mount tmpfs (the test runs as root): %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
}

func freeInodes(t *testing.T, dir string) uint64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ffree
}

// TestUnpackStopsBeforeInodesRunOut unpacks a layer of more files than the filesystem has inodes:
// the pull stops with ResourceExhausted while inodes are left for everything else, and leaves no
// part of the layer behind.
func TestUnpackStopsBeforeInodesRunOut(t *testing.T) {
	fsDir := mountSmallTmpfs(t, 3*inodeReserve)
	reg := newRegistry(t, false, "", "")
	small := reg.push(t, "test/small:1", imageOf(t, [][]byte{tarOf(t, dir("d"), file("d/a", "a"), file("d/b", "b"))}, nil))
	var many []entry
	for i := range 4 * inodeReserve {
		if i%1000 == 0 {
			many = append(many, dir(fmt.Sprintf("d%d", i/1000)))
		}
		many = append(many, file(fmt.Sprintf("d%d/f%d", i/1000, i), ""))
	}
	big := reg.push(t, "test/many:1", imageOf(t, [][]byte{tarOf(t, many...)}, nil))
	s := openStore(t, filepath.Join(fsDir, "store"))

	if _, err := s.Pull(ctxT(t), small, PullOptions{}); err != nil {
		t.Fatalf("a small layer on the same filesystem: %v", err)
	}
	before := freeInodes(t, fsDir)
	_, err := s.Pull(ctxT(t), big, PullOptions{})
	if !errors.Is(err, errdefs.ErrResourceExhausted) {
		t.Fatalf("pull of %d files onto %d free inodes: %v, want ResourceExhausted", len(many), before, err)
	}
	t.Logf("refused with: %v", err)
	if after := freeInodes(t, fsDir); after != before {
		t.Errorf("%d inodes free after the refused pull, %d before", after, before)
	}
	if ents, _ := os.ReadDir(filepath.Join(s.Root(), "tmp")); len(ents) != 0 {
		t.Errorf("tmp litter: %v", ents)
	}
	if imgs, _ := s.List(); len(imgs) != 1 {
		t.Errorf("images after the refused pull: %v", imgs)
	}
}
