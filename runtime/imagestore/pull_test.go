package imagestore

import (
	"encoding/base64"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/compression"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// twoLayerImage is busybox (gzip) plus a zstd layer with one file.
func twoLayerImage(t testing.TB, extra string) v1.Image {
	l1 := layerOf(t, busyboxTar(t), compression.GZip)
	l2 := layerOf(t, tarOf(t, dir("data"), file("data/msg", extra)), compression.ZStd)
	return imageOfLayers(t, []v1.Layer{l1, l2}, func(c *v1.Config) { c.Env = []string{"PATH=/bin"} })
}

func TestPullPlainHTTPLoopbackAndLookups(t *testing.T) {
	reg := newRegistry(t, false, "", "")
	img := twoLayerImage(t, "hello")
	full := reg.push(t, "test/busybox:1", img)
	s := openStore(t, t.TempDir())

	got, err := s.Pull(ctxT(t), full, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfgDigest, _ := img.ConfigName()
	if got.ID != cfgDigest.String() {
		t.Fatalf("ID %s, want %s", got.ID, cfgDigest)
	}
	if !slices.Equal(got.RepoTags, []string{full}) {
		t.Fatalf("tags %v", got.RepoTags)
	}
	mfDigest, _ := img.Digest()
	wantRD := reg.host + "/test/busybox@" + mfDigest.String()
	if !slices.Equal(got.RepoDigests, []string{wantRD}) {
		t.Fatalf("repo digests %v, want %s", got.RepoDigests, wantRD)
	}
	for _, ref := range []string{full, got.ID, strings.TrimPrefix(got.ID, "sha256:"), got.ID[7:19], wantRD} {
		if g, err := s.Get(ref); err != nil || g.ID != got.ID {
			t.Errorf("Get(%q) = %v, %v", ref, g, err)
		}
	}
	if _, err := s.Get(reg.host + "/test/busybox:2"); !errors.Is(err, errdefs.ErrNotFound) {
		t.Errorf("missing tag: %v", err)
	}
	for i, l := range got.Layers {
		m, err := s.readLayerMeta(l.ChainID)
		if err != nil {
			t.Fatalf("layer %d: %v", i, err)
		}
		if m.Bytes <= 0 || m.Inodes <= 0 {
			t.Errorf("layer %d usage %+v", i, m)
		}
	}
	diff := filepath.Join(s.layerDir(got.Layers[1].ChainID), "diff")
	if b, err := os.ReadFile(filepath.Join(diff, "data", "msg")); err != nil || string(b) != "hello" {
		t.Fatalf("zstd layer content: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(s.layerDir(got.Layers[0].ChainID), "diff", "bin", "busybox")); err != nil {
		t.Fatal(err)
	}
	imgs, err := s.List()
	if err != nil || len(imgs) != 1 {
		t.Fatalf("List = %v, %v", imgs, err)
	}
	if cfg, raw, err := s.Config(got); err != nil || len(raw) == 0 || cfg.Config.Env[0] != "PATH=/bin" {
		t.Fatalf("config %v %v", cfg, err)
	}
	im, ct, err := s.FsUsage()
	if err != nil || im.Bytes < 500_000 || im.Inodes < 5 || ct.Bytes != 0 {
		t.Fatalf("usage %+v %+v %v", im, ct, err)
	}
	// Pulling again fetches nothing new and keeps one record.
	if _, err := s.Pull(ctxT(t), full, PullOptions{}); err != nil {
		t.Fatal(err)
	}
	if imgs, _ := s.List(); len(imgs) != 1 {
		t.Fatalf("%d images after second pull", len(imgs))
	}
}

func TestPullHTTPSWithBasicAuth(t *testing.T) {
	reg := newRegistry(t, true, "alice", "s3cret")
	full := reg.push(t, "private/app:v1", twoLayerImage(t, "tls"), basicAuth("alice", "s3cret"))
	s := openStore(t, t.TempDir(), WithRegistryConfig(RegistryConfig{CAFiles: []string{reg.caFile(t)}}))

	if _, err := s.Pull(ctxT(t), full, PullOptions{}); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("anonymous pull: %v, want FailedPrecondition (unauthorized)", err)
	}
	if _, err := s.Pull(ctxT(t), full, PullOptions{Auth: &Auth{Username: "alice", Password: "wrong"}}); err == nil {
		t.Fatal("wrong password pulled")
	}
	if _, err := s.Pull(ctxT(t), full, PullOptions{Auth: &Auth{Username: "alice", Password: "s3cret"}}); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, t.TempDir(), WithRegistryConfig(RegistryConfig{CAFiles: []string{reg.caFile(t)}}))
	enc := base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))
	if _, err := s2.Pull(ctxT(t), full, PullOptions{Auth: &Auth{Auth: enc}}); err != nil {
		t.Fatalf("pull with auth field: %v", err)
	}
	// Without the CA the certificate is refused, and marking the host insecure skips verification.
	s3 := openStore(t, t.TempDir())
	if _, err := s3.Pull(ctxT(t), full, PullOptions{Auth: &Auth{Username: "alice", Password: "s3cret"}}); err == nil {
		t.Fatal("pulled over TLS from an untrusted certificate")
	}
	s4 := openStore(t, t.TempDir(), WithRegistryConfig(RegistryConfig{Insecure: []string{reg.host}}))
	if _, err := s4.Pull(ctxT(t), full, PullOptions{Auth: &Auth{Username: "alice", Password: "s3cret"}}); err != nil {
		t.Fatalf("insecure registry: %v", err)
	}
}

func platformIndex(t testing.TB, imgs map[string]v1.Image) v1.ImageIndex {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for arch, img := range imgs {
		img = mutate.MediaType(img, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	return idx
}

func pushIndex(t testing.TB, reg *testRegistry, ref string, idx v1.ImageIndex) string {
	full := reg.host + "/" + ref
	r, _ := name.ParseReference(full)
	if err := remote.WriteIndex(r, idx, remote.WithTransport(reg.srv.Client().Transport)); err != nil {
		t.Fatal(err)
	}
	return full
}

func TestPullOCIIndexPicksPlatform(t *testing.T) {
	reg := newRegistry(t, false, "", "")
	amd := twoLayerImage(t, "amd64")
	arm := imageOf(t, [][]byte{tarOf(t, file("arch", "arm64"))}, nil)
	idx := platformIndex(t, map[string]v1.Image{"amd64": amd, "arm64": arm})
	full := pushIndex(t, reg, "multi/app:latest", idx)
	s := openStore(t, t.TempDir())
	got, err := s.Pull(ctxT(t), full, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := amd.ConfigName()
	if got.ID != want.String() {
		t.Fatalf("picked %s, want the amd64 image %s", got.ID, want)
	}
	idxDigest, _ := idx.Digest()
	if !slices.Contains(got.RepoDigests, reg.host+"/multi/app@"+idxDigest.String()) {
		t.Fatalf("repo digest should name the index: %v", got.RepoDigests)
	}
}

func TestPullIndexWithoutMatchingPlatform(t *testing.T) {
	sb := newSandbox(t)
	reg := newRegistry(t, false, "", "")
	arm := imageOf(t, [][]byte{tarOf(t, file("arch", "arm64"))}, nil)
	full := pushIndex(t, reg, "multi/armonly:1", platformIndex(t, map[string]v1.Image{"arm64": arm, "s390x": arm}))
	s := openStore(t, sb.store)
	_, err := s.Pull(ctxT(t), full, PullOptions{})
	if !errors.Is(err, errdefs.ErrNotFound) || !strings.Contains(err.Error(), "no image for platform linux/amd64") {
		t.Fatalf("got %v, want NotFound naming the platform", err)
	}
	if imgs, _ := s.List(); len(imgs) != 0 {
		t.Fatalf("images: %v", imgs)
	}
	sb.checkOutside(t)
}

func TestPullThroughMirror(t *testing.T) {
	reg := newRegistry(t, false, "", "")
	reg.push(t, "pause:3.9", twoLayerImage(t, "pause"))
	reg.push(t, "library/busybox:latest", twoLayerImage(t, "bb"))
	var cfg RegistryConfig
	if err := cfg.AddMirror("registry.k8s.io=http://" + reg.host); err != nil {
		t.Fatal(err)
	}
	if err := cfg.AddMirror("docker.io=http://" + reg.host); err != nil {
		t.Fatal(err)
	}
	if err := cfg.AddMirror("nonsense"); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("bad mirror: %v", err)
	}
	s := openStore(t, t.TempDir(), WithRegistryConfig(cfg))
	got, err := s.Pull(ctxT(t), "registry.k8s.io/pause:3.9", PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.RepoTags, []string{"registry.k8s.io/pause:3.9"}) {
		t.Fatalf("tags %v", got.RepoTags)
	}
	got, err = s.Pull(ctxT(t), "busybox", PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.RepoTags, []string{"docker.io/library/busybox:latest"}) {
		t.Fatalf("tags %v", got.RepoTags)
	}
	for _, ref := range []string{"busybox", "busybox:latest", "library/busybox", "docker.io/library/busybox:latest", "index.docker.io/library/busybox"} {
		if g, err := s.Get(ref); err != nil || g.ID != got.ID {
			t.Errorf("Get(%q): %v", ref, err)
		}
	}
}

func TestConcurrentPullsShareOneDownload(t *testing.T) {
	reg := newRegistry(t, false, "", "")
	full := reg.push(t, "shared/img:1", twoLayerImage(t, "once"))
	var mu sync.Mutex
	gets := map[string]int{}
	reg.hook = func(w http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(r.URL.Path, "/blobs/") && r.Method == http.MethodGet {
			mu.Lock()
			gets[r.URL.Path]++
			mu.Unlock()
		}
		return false
	}
	s := openStore(t, t.TempDir())
	var wg sync.WaitGroup
	var ids sync.Map
	var fails atomic.Int32
	for i := range 6 {
		wg.Go(func() {
			img, err := s.Pull(ctxT(t), full, PullOptions{})
			if err != nil {
				t.Error(err)
				fails.Add(1)
				return
			}
			ids.Store(i, img.ID)
		})
	}
	wg.Wait()
	for p, n := range gets {
		if n != 1 {
			t.Errorf("%s fetched %d times", p, n)
		}
	}
	if len(gets) != 3 { // config and two layers
		t.Errorf("blob fetches: %v", gets)
	}
}

func TestInterruptedPullLeavesNothingVisibleAndResumes(t *testing.T) {
	reg := newRegistry(t, false, "", "")
	img := twoLayerImage(t, "resume")
	full := reg.push(t, "flaky/img:1", img)
	ls, _ := img.Layers()
	second, _ := ls[1].Digest()
	var failing atomic.Bool
	failing.Store(true)
	var mu sync.Mutex
	gets := map[string]int{}
	reg.hook = func(w http.ResponseWriter, r *http.Request) bool {
		if strings.Contains(r.URL.Path, "/blobs/") && r.Method == http.MethodGet {
			mu.Lock()
			gets[r.URL.Path]++
			mu.Unlock()
			if failing.Load() && strings.HasSuffix(r.URL.Path, second.String()) {
				http.Error(w, "gone", http.StatusNotFound)
				return true
			}
		}
		return false
	}
	dir := t.TempDir()
	// One download at a time, so the first layer is complete before the second one fails.
	s := openStore(t, dir, WithParallelDownloads(1))
	if _, err := s.Pull(ctxT(t), full, PullOptions{}); err == nil {
		t.Fatal("pull succeeded with a missing layer")
	}
	if imgs, _ := s.List(); len(imgs) != 0 {
		t.Fatalf("half-pulled image is visible: %v", imgs)
	}
	if _, err := s.Get(full); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "tmp"))
	if len(ents) != 0 {
		t.Fatalf("tmp litter: %v", ents)
	}
	// A fresh process (a new Store) resumes: the finished layer is not fetched again.
	failing.Store(false)
	s = openStore(t, dir)
	var last Progress
	var mu2 sync.Mutex
	if _, err := s.Pull(ctxT(t), full, PullOptions{Progress: func(p Progress) { mu2.Lock(); last = p; mu2.Unlock() }}); err != nil {
		t.Fatal(err)
	}
	first, _ := ls[0].Digest()
	for p, n := range gets {
		if strings.HasSuffix(p, first.String()) && n != 1 {
			t.Errorf("finished layer fetched %d times", n)
		}
	}
	if last.Layers != 1 || last.LayersDone != 1 || last.BytesDone != last.Bytes || last.Bytes == 0 {
		t.Errorf("final progress %+v, want the one missing layer done", last)
	}
}

func TestRetagMovesTagAndRemoveFreesLayers(t *testing.T) {
	reg := newRegistry(t, false, "", "")
	full := reg.push(t, "app/x:latest", twoLayerImage(t, "v1"))
	dir := t.TempDir()
	s := openStore(t, dir)
	a, err := s.Pull(ctxT(t), full, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reg.push(t, "app/x:latest", twoLayerImage(t, "v2"))
	b, err := s.Pull(ctxT(t), full, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == b.ID {
		t.Fatal("same image")
	}
	oldA, err := s.Get(a.ID)
	if err != nil || len(oldA.RepoTags) != 0 {
		t.Fatalf("old image keeps tags %v (%v)", oldA, err)
	}
	if g, _ := s.Get(full); g.ID != b.ID {
		t.Fatal("tag did not move")
	}
	if err := s.Remove(ctxT(t), a.ID); err != nil {
		t.Fatal(err)
	}
	// The busybox layer is shared and stays; a's own top layer goes.
	if !s.hasLayer(b.Layers[0].ChainID) || !s.hasLayer(b.Layers[1].ChainID) {
		t.Fatal("a layer of the remaining image was freed")
	}
	if s.hasLayer(a.Layers[1].ChainID) {
		t.Fatal("unused layer kept")
	}
	if err := s.Remove(ctxT(t), full); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(ctxT(t), full); !errors.Is(err, errdefs.ErrNotFound) {
		t.Fatalf("second remove: %v", err)
	}
	for _, d := range []string{"layers", "l", "images", "blobs/sha256"} {
		if ents, _ := os.ReadDir(filepath.Join(dir, d)); len(ents) != 0 {
			t.Errorf("%s not empty after removing everything: %v", d, ents)
		}
	}
}

func TestRemoveDuringPullKeepsPinnedLayers(t *testing.T) {
	reg := newRegistry(t, false, "", "")
	a := reg.push(t, "pin/a:1", twoLayerImage(t, "a"))
	bImg := twoLayerImage(t, "b") // same busybox layer, own top layer
	b := reg.push(t, "pin/b:1", bImg)
	ls, _ := bImg.Layers()
	top, _ := ls[1].Digest()
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	reg.hook = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, top.String()) {
			once.Do(func() { close(reached) })
			<-release
		}
		return false
	}
	s := openStore(t, t.TempDir())
	imgA, err := s.Pull(ctxT(t), a, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Pull(ctxT(t), b, PullOptions{})
		done <- err
	}()
	<-reached
	// The pull of b is stuck mid-download; removing a must not wait for it, and must keep the
	// busybox layer b relies on.
	if err := s.Remove(ctxT(t), imgA.ID); err != nil {
		t.Fatal(err)
	}
	if !s.hasLayer(imgA.Layers[0].ChainID) {
		t.Fatal("GC freed a layer an in-flight pull relies on")
	}
	if s.hasLayer(imgA.Layers[1].ChainID) {
		t.Fatal("a's own layer was kept")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rf, err := s.PrepareRootfs(ctxT(t), "pinned", b)
	if err != nil {
		t.Fatal(err)
	}
	defer s.RemoveRootfs(ctxT(t), "pinned")
	if _, err := os.Stat(filepath.Join(rf.Path, "bin", "busybox")); err != nil {
		t.Fatal(err)
	}
}

func TestPullUnreachableRegistryIsUnavailable(t *testing.T) {
	srv := newRegistry(t, false, "", "")
	host := srv.host
	srv.srv.Close() // nothing listens there any more
	s := openStore(t, t.TempDir())
	_, err := s.Pull(ctxT(t), host+"/gone/img:1", PullOptions{})
	if !errors.Is(err, errdefs.ErrUnavailable) {
		t.Fatalf("got %v, want Unavailable", err)
	}
}
