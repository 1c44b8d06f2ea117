package imagestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/internal/fileid"
)

// Remove deletes the image ref names (by any of its names or its ID, with all its tags, as CRI's
// RemoveImage does) and frees the layers and blobs nothing else uses. An image a container rootfs
// uses is refused with errdefs.ErrFailedPrecondition. A missing image is errdefs.ErrNotFound.
func (s *Store) Remove(ctx context.Context, ref string) error {
	lk, err := s.metaLock()
	if err != nil {
		return err
	}
	defer lk.unlock()
	img, err := s.Get(ref)
	if err != nil {
		return err
	}
	users, err := s.rootfsRecords()
	if err != nil {
		return err
	}
	for _, u := range users {
		if u.ImageID == img.ID {
			return fmt.Errorf("image %s is used by container %s: %w", img.ID, u.ContainerID, errdefs.ErrFailedPrecondition)
		}
	}
	if err := os.Remove(s.recordPath(img.ID)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := syncDir(s.path("images")); err != nil {
		return err
	}
	return s.gcLocked()
}

// GC frees layers, links and blobs that no image or container references. Remove calls it; a daemon
// may also call it after a crash.
func (s *Store) GC() error {
	lk, err := s.metaLock()
	if err != nil {
		return err
	}
	defer lk.unlock()
	return s.gcLocked()
}

// gcLocked runs under the meta lock, so no record is being written and no rootfs prepared. Pulls in
// flight in any process pin the layers they are bringing in (see pinLayers); those stay.
func (s *Store) gcLocked() error {
	imgs, err := s.loadAll()
	if err != nil {
		return err
	}
	pinned, err := s.pinnedLayers()
	if err != nil {
		return err
	}
	users, err := s.rootfsRecords()
	if err != nil {
		return err
	}
	liveLayers := pinned
	liveBlobs := map[string]bool{}
	for _, img := range imgs {
		liveBlobs[img.ID] = true
		liveBlobs[img.ManifestDigest] = true
		for _, l := range img.Layers {
			liveLayers[l.ChainID] = true
		}
	}
	for _, u := range users {
		liveBlobs[u.ImageID] = true
		for _, c := range u.Layers {
			liveLayers[c] = true
		}
	}
	var errs []error
	ents, _ := os.ReadDir(s.path("layers"))
	for _, e := range ents {
		chain := "sha256:" + e.Name()
		if liveLayers[chain] {
			continue
		}
		if m, err := s.readLayerMeta(chain); err == nil {
			os.Remove(s.path("l", m.Link))
		}
		// Rename first so a half-deleted layer is never mistaken for a complete one.
		trash, err := os.MkdirTemp(s.path("tmp"), "gc-")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Rename(s.path("layers", e.Name()), filepath.Join(trash, "layer")); err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(trash); err != nil {
			errs = append(errs, err)
		}
	}
	links, _ := os.ReadDir(s.path("l"))
	for _, l := range links {
		if _, err := os.Stat(s.path("l", l.Name())); errors.Is(err, fs.ErrNotExist) {
			os.Remove(s.path("l", l.Name())) // dangling: its layer is gone or was never finished
		}
	}
	blobs, _ := os.ReadDir(s.path("blobs", "sha256"))
	for _, b := range blobs {
		if !liveBlobs["sha256:"+b.Name()] && !strings.HasPrefix(b.Name(), ".") {
			if err := os.Remove(s.path("blobs", "sha256", b.Name())); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// ListRootfs lists the IDs of every container rootfs the store holds, half-made ones included,
// so that a restarted runtime can remove those no container owns: each one pins its image.
func (s *Store) ListRootfs(ctx context.Context) ([]string, error) {
	ents, err := os.ReadDir(s.path("rootfs"))
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && fileid.Valid(e.Name()) {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

func (s *Store) rootfsRecords() ([]*rootfsRecord, error) {
	ents, err := os.ReadDir(s.path("rootfs"))
	if err != nil {
		return nil, err
	}
	var out []*rootfsRecord
	for _, e := range ents {
		r, err := s.readRootfsRecord(e.Name())
		if errors.Is(err, fs.ErrNotExist) {
			continue // being created or removed; its directory holds no layers of its own
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Usage is what a part of the store occupies on disk.
type Usage struct {
	Bytes, Inodes int64
}

// FsUsage reports the disk use of images (layers and blobs) and of containers' writable layers.
func (s *Store) FsUsage() (images, containers Usage, err error) {
	ents, err := os.ReadDir(s.path("layers"))
	if err != nil {
		return images, containers, err
	}
	for _, e := range ents {
		m, err := s.readLayerMeta("sha256:" + e.Name())
		if err != nil {
			continue
		}
		images.Bytes += m.Bytes
		images.Inodes += m.Inodes + 2 // the layer dir and its layer.json
	}
	for _, d := range []string{"blobs", "images", "l"} {
		b, n := diskUsage(s.path(d))
		images.Bytes += b
		images.Inodes += n
	}
	recs, err := s.rootfsRecords()
	if err != nil {
		return images, containers, err
	}
	for _, r := range recs {
		b, n := diskUsage(filepath.Join(s.rootfsDir(r.ContainerID), "upper"))
		containers.Bytes += b
		containers.Inodes += n
	}
	return images, containers, nil
}

// pinLayers records, in a file that stays flocked until unpin is called, the layers a pull is about
// to rely on, so a concurrent GC in any process leaves them alone though no image names them yet.
// A pin whose owner died is unlocked and thereby stale.
func (s *Store) pinLayers(chains []string) (unpin func(), err error) {
	// Written and locked under a name GC ignores, then renamed: a pin GC sees is always complete.
	f, err := os.CreateTemp(s.path("tmp"), "pinning-")
	if err != nil {
		return nil, err
	}
	fail := func(err error) (func(), error) {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return fail(err)
	}
	if _, err := f.WriteString(strings.Join(chains, "\n")); err != nil {
		return fail(err)
	}
	pin := s.path("tmp", "pin-"+strings.TrimPrefix(filepath.Base(f.Name()), "pinning-"))
	if err := os.Rename(f.Name(), pin); err != nil {
		return fail(err)
	}
	return func() {
		os.Remove(pin)
		f.Close()
	}, nil
}

func (s *Store) pinnedLayers() (map[string]bool, error) {
	live := map[string]bool{}
	ents, err := os.ReadDir(s.path("tmp"))
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "pin-") {
			continue
		}
		p := s.path("tmp", e.Name())
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB) == nil {
			// Nobody holds it: its pull died. The content may be partial, so do not trust it.
			os.Remove(p)
			f.Close()
			continue
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			return nil, err
		}
		for _, c := range strings.Split(string(b), "\n") {
			live[c] = true
		}
	}
	return live, nil
}
