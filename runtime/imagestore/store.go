// Package imagestore keeps container images on local disk: it pulls them from registries, verifies every
// blob, unpacks each layer once (keyed by chain ID) into a directory usable as an overlay lowerdir, and
// mounts per-container overlay root filesystems over them.
//
// Layout under the store root (every name below is written by this package only):
//
//	lock                    flock: shared while pulling or preparing a rootfs; taken exclusive (without
//	                        waiting) only at Open, to sweep tmp/ when no one else is working
//	meta.lock               flock: exclusive around every metadata transaction (records, tags,
//	                        rootfs records, removal and GC)
//	blobs/sha256/<hex>      manifests and configs, verified before they are written
//	layers/<chain hex>/     diff/ (the unpacked layer, overlay whiteout format) and layer.json
//	l/<short id>            symlink to ../layers/<chain hex>/diff; keeps overlay mount options short
//	images/<config hex>.json one record per image: tags, repo digests, layers
//	rootfs/<container id>/  upper/, work/, merged/ and rootfs.json for each prepared container rootfs
//	tmp/                    work in progress, and pin-* files naming the layers in-flight pulls rely on
//
// Everything becomes visible by rename(2) after it is complete and fsynced, so a killed pull leaves only
// tmp/ litter and whatever complete layers it had finished; the next pull reuses those.
package imagestore

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"
)

// Store is the image store rooted at one directory. It is safe for concurrent use, and for use by
// several processes on the same root (a daemon and the CLI) thanks to its lock files.
type Store struct {
	root     string
	reg      RegistryConfig
	platform v1.Platform
	parallel int
	rt       http.RoundTripper
	log      *slog.Logger
	maxLayer int64 // uncompressed bytes one layer may hold; 0 is no limit
	reserve  int64 // free bytes a pull must leave on the store's filesystem

	pulls  flightGroup[*Image] // dedupes concurrent pulls of the same reference
	layers flightGroup[struct{}]
}

// Option configures a Store.
type Option func(*Store)

// WithRegistryConfig sets mirrors, plain-HTTP registries and CA files.
func WithRegistryConfig(c RegistryConfig) Option { return func(s *Store) { s.reg = c } }

// WithPlatform sets the platform picked from image indexes (default linux and this CPU).
func WithPlatform(p v1.Platform) Option { return func(s *Store) { s.platform = p } }

// WithParallelDownloads bounds how many layers one pull fetches at once (default 3).
func WithParallelDownloads(n int) Option {
	return func(s *Store) {
		if n > 0 {
			s.parallel = n
		}
	}
}

// WithTransport sets the base HTTP transport (tests use it to trust their own CA or to inject faults).
func WithTransport(rt http.RoundTripper) Option { return func(s *Store) { s.rt = rt } }

// WithMaxLayerSize caps the uncompressed size of one layer (default: no cap besides free space).
func WithMaxLayerSize(n int64) Option { return func(s *Store) { s.maxLayer = n } }

// WithDiskReserve sets how much free space an unpacking layer must leave on the store's
// filesystem (default 512 MiB), so a decompression bomb fails the pull rather than filling the disk.
func WithDiskReserve(n int64) Option { return func(s *Store) { s.reserve = n } }

// WithLogger sets the logger.
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// Open opens (creating if needed) the store rooted at dir, e.g. <root>/runtime/images.
func Open(dir string, opts ...Option) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{
		root:     abs,
		platform: v1.Platform{OS: "linux", Architecture: goruntime.GOARCH},
		parallel: 3,
		log:      slog.Default(),
		reserve:  512 << 20,
	}
	for _, o := range opts {
		o(s)
	}
	if err := s.makeDirs(); err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	s.cleanTmp()
	return s, nil
}

// storeDirModes: the unpacked layers hold the images' setuid files and devices, and a rootfs is
// a live container's file system, so no other host user may reach into either. A container in
// its own user namespace runs as a mapped id that must reach its rootfs (rootfs/<id>/merged) by
// path: the store root and rootfs/ are searchable by others, not listable, and each
// rootfs/<id> is private (see PrepareRootfs and RemountIdmapped). The modes are set again on
// every start, so a store made by an older, laxer version is tightened too.
var storeDirModes = []struct {
	name string
	mode os.FileMode
}{
	{"", 0o711},
	{"blobs", 0o700},
	{"blobs/sha256", 0o700},
	{"layers", 0o700},
	{"l", 0o700},
	{"images", 0o700},
	{"rootfs", 0o711},
	{"tmp", 0o700},
}

func (s *Store) makeDirs() error {
	for _, d := range storeDirModes {
		p := s.path(d.name)
		if err := os.MkdirAll(p, d.mode); err != nil {
			return err
		}
		if err := os.Chmod(p, d.mode); err != nil {
			return err
		}
	}
	return s.tightenRootfsDirs()
}

// tightenRootfsDirs takes away what others (and the group, but for search) may do in the rootfs
// dirs of containers prepared by an older version, which made them 0755.
func (s *Store) tightenRootfsDirs() error {
	ents, err := os.ReadDir(s.path("rootfs"))
	if err != nil {
		return err
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil || !fi.IsDir() || fi.Mode().Perm()&0o067 == 0 {
			continue
		}
		if err := os.Chmod(s.path("rootfs", e.Name()), fi.Mode().Perm()&^0o067); err != nil {
			return err
		}
	}
	return nil
}

// Root is the directory the store lives in.
func (s *Store) Root() string { return s.root }

func (s *Store) path(elem ...string) string {
	return filepath.Join(append([]string{s.root}, elem...)...)
}

// cleanTmp removes leftovers of killed pulls, but only when no process is working in the store:
// another process's pull holds the shared lock while its files sit in tmp/.
func (s *Store) cleanTmp() {
	f, err := os.OpenFile(s.path("lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return
	}
	ents, _ := os.ReadDir(s.path("tmp"))
	for _, e := range ents {
		_ = os.RemoveAll(s.path("tmp", e.Name()))
	}
}

// fileLock is one flock held on its own open file description, so two holders inside one process
// exclude each other exactly as two processes do.
type fileLock struct{ f *os.File }

func (s *Store) lock(name string, how int) (*fileLock, error) {
	f, err := os.OpenFile(s.path(name), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return &fileLock{f: f}, nil
}

func (l *fileLock) unlock() {
	if l != nil && l.f != nil {
		l.f.Close() // closing the last fd releases the flock
	}
}

func (s *Store) sharedLock() (*fileLock, error) { return s.lock("lock", unix.LOCK_SH) }
func (s *Store) metaLock() (*fileLock, error)   { return s.lock("meta.lock", unix.LOCK_EX) }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
