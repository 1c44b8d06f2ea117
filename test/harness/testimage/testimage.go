// Package testimage builds small OCI images from the host's busybox for tests and for the stand-ins
// of the upstream images that critest and the kubelet pull, and serves them from an in-process
// registry. Nothing upstream is reachable on the test machines, so every image a test needs is made
// here, deterministically: the same options give the same digest on every run.
package testimage

import (
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// epoch is the time of every file and of the image config: fixed so digests are reproducible.
var epoch = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// User is an /etc/passwd entry; its primary group is added to /etc/group unless it exists.
type User struct {
	Name string
	UID  int
	GID  int
	Home string // default "/"
}

// Group is an /etc/group entry.
type Group struct {
	Name    string
	GID     int
	Members []string
}

type file struct {
	path     string
	content  []byte
	mode     os.FileMode
	uid, gid int
	link     string // symlink target when mode&os.ModeSymlink
}

type builder struct {
	busybox     string // host path of a static busybox; "" for the host's, "-" for an image without it
	dynamic     bool
	allInBin    bool
	users       []User
	groups      []Group
	files       []file
	extraLayers []int             // size of each extra layer in bytes
	hostBins    map[string]string // image path → host path of extra dynamic binaries
	cfg         v1.Config
	hasCmd      bool
	err         error
}

// Option changes what Busybox builds.
type Option func(*builder)

// WithFile adds a regular file, owned by root, in a layer above the base. mode may carry
// os.ModeSetuid, os.ModeSetgid and os.ModeSticky.
func WithFile(path, content string, mode os.FileMode) Option {
	return WithOwnedFile(path, content, mode, 0, 0)
}

// WithOwnedFile is WithFile with an owner.
func WithOwnedFile(path, content string, mode os.FileMode, uid, gid int) Option {
	return func(b *builder) {
		b.files = append(b.files, file{path: path, content: []byte(content), mode: mode, uid: uid, gid: gid})
	}
}

// WithDir adds a directory (mode may carry os.ModeSticky), owned by uid:gid.
func WithDir(path string, mode os.FileMode, uid, gid int) Option {
	return func(b *builder) {
		b.files = append(b.files, file{path: path, mode: mode | os.ModeDir, uid: uid, gid: gid})
	}
}

// WithSymlink adds a symbolic link at path pointing to target.
func WithSymlink(path, target string) Option {
	return func(b *builder) {
		b.files = append(b.files, file{path: path, mode: os.ModeSymlink | 0o777, link: target})
	}
}

// WithUsers adds entries to /etc/passwd (and each one's primary group to /etc/group).
func WithUsers(users ...User) Option {
	return func(b *builder) { b.users = append(b.users, users...) }
}

// WithGroups adds entries to /etc/group.
func WithGroups(groups ...Group) Option {
	return func(b *builder) { b.groups = append(b.groups, groups...) }
}

// WithUser sets the image config's User ("name", "uid", "uid:gid", "name:group").
func WithUser(user string) Option { return func(b *builder) { b.cfg.User = user } }

// WithEntrypoint sets the image config's Entrypoint.
func WithEntrypoint(args ...string) Option {
	return func(b *builder) { b.cfg.Entrypoint = slices.Clone(args) }
}

// WithCmd sets the image config's Cmd (default ["sh"]; WithCmd() with no args clears it).
func WithCmd(args ...string) Option {
	return func(b *builder) { b.cfg.Cmd = slices.Clone(args); b.hasCmd = true }
}

// WithEnv adds KEY=VALUE entries to the image config's Env, after PATH.
func WithEnv(kv ...string) Option {
	return func(b *builder) {
		for _, e := range kv {
			if !strings.Contains(e, "=") {
				b.err = fmt.Errorf("testimage: env %q: want KEY=VALUE", e)
			}
		}
		b.cfg.Env = append(b.cfg.Env, kv...)
	}
}

// WithWorkdir sets the image config's WorkingDir; the directory is created in the image.
func WithWorkdir(dir string) Option {
	return func(b *builder) {
		b.cfg.WorkingDir = dir
		b.files = append(b.files, file{path: dir, mode: os.ModeDir | 0o755})
	}
}

// WithExposedPorts adds "80/tcp"-style entries to the image config's ExposedPorts.
func WithExposedPorts(ports ...string) Option {
	return func(b *builder) {
		if b.cfg.ExposedPorts == nil {
			b.cfg.ExposedPorts = map[string]struct{}{}
		}
		for _, p := range ports {
			if !strings.Contains(p, "/") {
				p += "/tcp"
			}
			b.cfg.ExposedPorts[p] = struct{}{}
		}
	}
}

// WithLabels adds image config labels.
func WithLabels(labels map[string]string) Option {
	return func(b *builder) {
		if b.cfg.Labels == nil {
			b.cfg.Labels = map[string]string{}
		}
		maps.Copy(b.cfg.Labels, labels)
	}
}

// WithStopSignal sets the image config's StopSignal (e.g. "SIGUSR1").
func WithStopSignal(sig string) Option { return func(b *builder) { b.cfg.StopSignal = sig } }

// WithLayers adds n layers above the others, each holding one file of sizeEach bytes of
// incompressible data (/layers/N), for pull and unpack benchmarks.
func WithLayers(n, sizeEach int) Option {
	return func(b *builder) {
		for range n {
			b.extraLayers = append(b.extraLayers, sizeEach)
		}
	}
}

// WithDynamicBusybox uses Debian's dynamically linked busybox and the host libraries it loads
// instead of busybox-static. Its applets are hard links run as separate processes, so tests that
// look at processes (MaskedPaths, pidof) see them. hack/install-extras.sh puts it in place.
func WithDynamicBusybox() Option { return func(b *builder) { b.dynamic = true } }

// WithHostBinary copies a host executable into the image at imagePath, with the loader and
// shared libraries it needs (in the base layer). It gives stand-in images the tools busybox lacks
// (procps' pgrep, util-linux's ipcs) that upstream test images have.
func WithHostBinary(hostPath, imagePath string) Option {
	return func(b *builder) {
		if b.hostBins == nil {
			b.hostBins = map[string]string{}
		}
		b.hostBins[strings.TrimPrefix(imagePath, "/")] = hostPath
	}
}

// WithAppletsInBin also links every applet into /bin, as the official busybox image lays them
// out: specs of the Kubernetes suite run /bin/sysctl, which a distribution puts in /sbin.
func WithAppletsInBin() Option { return func(b *builder) { b.allInBin = true } }

// WithBusyboxBinary uses the static busybox at path instead of the host's (the conformance
// images use an upstream build: Debian's ash drops environment names that are not identifiers).
func WithBusyboxBinary(path string) Option { return func(b *builder) { b.busybox = path } }

// WithoutBusybox makes an image of only the given files (a pause-like or data-only image).
func WithoutBusybox() Option { return func(b *builder) { b.busybox = "-" } }

// Busybox builds an image: a base layer with busybox, its applets as hard links in the paths
// busybox itself lists, /etc/passwd and /etc/group, the standard directories; a layer with the
// files of WithFile and friends if any; then the layers of WithLayers.
func Busybox(opts ...Option) (v1.Image, error) {
	b := &builder{
		users: []User{
			{Name: "root", UID: 0, GID: 0, Home: "/root"},
			{Name: "nobody", UID: 65534, GID: 65534, Home: "/nonexistent"},
		},
		groups: []Group{{Name: "root", GID: 0}, {Name: "nogroup", GID: 65534}},
		cfg: v1.Config{
			Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			Cmd: []string{"sh"},
		},
	}
	for _, o := range opts {
		o(b)
	}
	if b.err != nil {
		return nil, b.err
	}
	if b.busybox == "-" && !b.hasCmd {
		b.cfg.Cmd = nil
	}

	var layers []v1.Layer
	base, err := b.baseLayer()
	if err != nil {
		return nil, err
	}
	layers = append(layers, base)
	if len(b.files) > 0 {
		l, err := layerOf(b.files)
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}
	for i, size := range b.extraLayers {
		l, err := layerOf([]file{{path: fmt.Sprintf("/layers/%d", i), content: noise(i, size), mode: 0o644}})
		if err != nil {
			return nil, err
		}
		layers = append(layers, l)
	}

	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture = runtime.GOARCH
	cf.OS = "linux"
	cf.Created = v1.Time{Time: epoch}
	cf.Config = b.cfg
	return mutate.ConfigFile(img, cf)
}

// MustBusybox is Busybox for package-level test fixtures; it panics on error.
func MustBusybox(opts ...Option) v1.Image {
	img, err := Busybox(opts...)
	if err != nil {
		panic(err)
	}
	return img
}
