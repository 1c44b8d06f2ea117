package imageservice

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/imagestore"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// busyboxImage is busybox-static as /bin/busybox and /bin/sh, run as user 1000.
func busyboxImage(t *testing.T) v1.Image {
	testutil.Require(t, "busybox")
	bb, err := os.ReadFile(testutil.LookPath("busybox"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755})
	tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bb))})
	tw.Write(bb)
	tw.WriteHeader(&tar.Header{Name: "bin/sh", Typeflag: tar.TypeSymlink, Linkname: "busybox"})
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
	cf.Config.Cmd = []string{"/bin/sh"}
	cf.Config.User = "1000:1000"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// serve pushes img to an in-process registry that wants basic auth, and returns its reference.
func serve(t *testing.T, img v1.Image) string {
	reg := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "bob" || p != "pw" {
			w.Header().Set("WWW-Authenticate", `Basic realm="t"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		reg.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	ref := strings.TrimPrefix(srv.URL, "http://") + "/tools/busybox:1.35"
	r, _ := name.ParseReference(ref)
	if err := remote.Write(r, img, remote.WithAuth(authn.FromConfig(authn.AuthConfig{Username: "bob", Password: "pw"}))); err != nil {
		t.Fatal(err)
	}
	return ref
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func spec(ref string) *runtimeapi.ImageSpec { return &runtimeapi.ImageSpec{Image: ref} }

func TestImageServiceLifecycle(t *testing.T) {
	img := busyboxImage(t)
	ref := serve(t, img)
	dir := t.TempDir()
	testutil.CheckNoLeaks(t, dir)
	store, err := imagestore.Open(dir, imagestore.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	svc := New(store, WithLogger(slog.New(slog.DiscardHandler)), WithPinned(ref))
	ctx := ctxT(t)

	if _, err := svc.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec(ref)}); errdefs.Code(err) != codes.FailedPrecondition {
		t.Fatalf("pull without credentials: %v (code %v)", err, errdefs.Code(err))
	}
	if _, err := svc.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec("")}); errdefs.Code(err) != codes.InvalidArgument {
		t.Fatalf("empty ref: %v", err)
	}
	auth := base64.StdEncoding.EncodeToString([]byte("bob:pw"))
	pulled, err := svc.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec(ref), Auth: &runtimeapi.AuthConfig{Auth: auth}})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := img.ConfigName()
	if pulled.ImageRef != id.String() {
		t.Fatalf("ImageRef %s, want %s", pulled.ImageRef, id)
	}
	if _, err := svc.PullImage(ctx, &runtimeapi.PullImageRequest{Image: spec(ref), Auth: &runtimeapi.AuthConfig{Username: "bob", Password: "pw"}}); err != nil {
		t.Fatal(err)
	}

	list, err := svc.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil || len(list.Images) != 1 {
		t.Fatalf("list: %v %v", list, err)
	}
	got := list.Images[0]
	if got.Id != id.String() || got.RepoTags[0] != ref || len(got.RepoDigests) != 1 || got.Size == 0 ||
		got.Uid.GetValue() != 1000 || got.Username != "" || !got.Pinned {
		t.Fatalf("image %v", got)
	}
	for _, f := range []string{ref, id.String(), got.RepoDigests[0]} {
		l, err := svc.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: &runtimeapi.ImageFilter{Image: spec(f)}})
		if err != nil || len(l.Images) != 1 {
			t.Errorf("filter %q: %v %v", f, l, err)
		}
	}
	l, err := svc.ListImages(ctx, &runtimeapi.ListImagesRequest{Filter: &runtimeapi.ImageFilter{Image: spec("nothere:1")}})
	if err != nil || len(l.Images) != 0 {
		t.Errorf("filter on a missing image: %v %v", l, err)
	}

	st, err := svc.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec(ref), Verbose: true})
	if err != nil || st.Image == nil {
		t.Fatalf("status: %v %v", st, err)
	}
	var info struct {
		ImageSpec struct {
			Config struct{ Cmd []string }
		} `json:"imageSpec"`
		ChainID string `json:"chainID"`
	}
	if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil || info.ImageSpec.Config.Cmd[0] != "/bin/sh" || info.ChainID == "" {
		t.Fatalf("verbose info %q: %v", st.Info["info"], err)
	}
	if st, err := svc.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: spec("nothere:1")}); err != nil || st.Image != nil {
		t.Fatalf("status of a missing image: %v %v", st, err)
	}

	fs, err := svc.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	u := fs.ImageFilesystems[0]
	if u.FsId.Mountpoint != dir || u.UsedBytes.Value < uint64(500_000) || u.InodesUsed.Value < 3 {
		t.Fatalf("image fs %v", u)
	}

	// In use by a container: refused. Then free: removed, and removing again succeeds.
	if _, err := store.PrepareRootfs(ctx, "c1", ref); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: spec(ref)}); errdefs.Code(err) != codes.FailedPrecondition {
		t.Fatalf("remove in use: %v", err)
	}
	if err := store.RemoveRootfs(ctx, "c1"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := svc.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: spec(ref)}); err != nil {
			t.Fatal(err)
		}
	}
	if list, _ := svc.ListImages(ctx, &runtimeapi.ListImagesRequest{}); len(list.Images) != 0 {
		t.Fatalf("left: %v", list.Images)
	}
}
