package imagestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/cyphar/filepath-securejoin/pathrs-lite"
	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/internal/fileid"
	"github.com/nodelet/nodelet/runtime/internal/lockedthread"
)

// rootfsRecord is rootfs/<id>/rootfs.json. It exists before the mount does and outlives it until
// RemoveRootfs, so the image and its layers count as in use for exactly that span.
type rootfsRecord struct {
	ContainerID string   `json:"containerID"`
	ImageID     string   `json:"imageID"`
	ImageRef    string   `json:"imageRef"`
	Layers      []string `json:"layers"` // chain IDs, bottom first
}

func (s *Store) rootfsDir(id string) string { return s.path("rootfs", id) }

// PrepareRootfs mounts a writable overlay for containerID over the layers of image (a name,
// name@digest or image ID) and returns it. Calling it again for the same container returns the same
// rootfs, remounting it if it was unmounted (after a reboot, say).
func (s *Store) PrepareRootfs(ctx context.Context, containerID, image string) (_ *Rootfs, retErr error) {
	if !fileid.Valid(containerID) {
		return nil, fmt.Errorf("container ID %q: %w", containerID, errdefs.ErrInvalidArgument)
	}
	lk, err := s.sharedLock()
	if err != nil {
		return nil, err
	}
	defer lk.unlock()
	ml, err := s.metaLock()
	if err != nil {
		return nil, err
	}
	defer ml.unlock()

	dir := s.rootfsDir(containerID)
	rec, err := s.readRootfsRecord(containerID)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrNotExist):
		img, err := s.Get(image)
		if err != nil {
			return nil, err
		}
		rec = &rootfsRecord{ContainerID: containerID, ImageID: img.ID, ImageRef: img.ID}
		if len(img.RepoDigests) > 0 {
			rec.ImageRef = img.RepoDigests[0]
		}
		for _, l := range img.Layers {
			if !s.hasLayer(l.ChainID) {
				return nil, fmt.Errorf("image %s: layer %s is missing; pull the image again: %w", img.ID, l.ChainID, errdefs.ErrFailedPrecondition)
			}
			rec.Layers = append(rec.Layers, l.ChainID)
		}
		if err := makeRootfsDirs(dir); err != nil {
			return nil, err
		}
		defer func() {
			if retErr != nil {
				s.unmountAndDelete(containerID)
			}
		}()
		b, _ := json.Marshal(rec)
		// Not synced to the folder: a power loss may undo it, but it ends the container too, and
		// a rootfs dir with no record holds no layer in use and goes with its container.
		if err := atomicfile.Replace(filepath.Join(dir, "rootfs.json"), b, 0o600); err != nil {
			return nil, err
		}
	default:
		return nil, err
	}

	cfg, _, err := s.Config(&Image{ID: rec.ImageID})
	if err != nil {
		return nil, err
	}
	merged := filepath.Join(dir, "merged")
	if mounted, _ := mountinfo.Mounted(merged); !mounted {
		// After a reboot or a half-finished removal the record may outlive its directories.
		if err := makeRootfsDirs(dir); err != nil {
			return nil, err
		}
		if err := s.mountOverlay(rec); err != nil {
			return nil, err
		}
	}
	vols, err := makeVolumeDirs(merged, cfg.Config.Volumes)
	if err != nil {
		return nil, err
	}
	c := cfg.Config
	c.Volumes = vols
	return &Rootfs{Path: merged, UpperDir: filepath.Join(dir, "upper"), ImageID: rec.ImageID, ImageRef: rec.ImageRef, Config: c}, nil
}

// makeRootfsDirs makes a container's rootfs dir private. Its overlay cannot be mounted nosuid
// (the container's own setuid programs must work), so the image's setuid-root files are
// reachable through merged/ by anyone who can walk to it: the 0700 dir is what keeps other host
// users out. upper/ is 0755 because the container's / takes its mode from it.
func makeRootfsDirs(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	for _, d := range []struct {
		name string
		mode os.FileMode
	}{{"upper", 0o755}, {"work", 0o700}, {"merged", 0o755}} {
		if err := os.Mkdir(filepath.Join(dir, d.name), d.mode); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	}
	return nil
}

func (s *Store) readRootfsRecord(id string) (*rootfsRecord, error) {
	b, err := os.ReadFile(filepath.Join(s.rootfsDir(id), "rootfs.json"))
	if err != nil {
		return nil, err
	}
	var r rootfsRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("rootfs record %s: %w", id, err)
	}
	return &r, nil
}

// mountOverlay mounts the container's overlay. Lower dirs are named by their short links relative
// to the store root, from a thread whose working directory is the store root: absolute paths would
// hit the one-page limit on mount options after a few dozen layers.
func (s *Store) mountOverlay(rec *rootfsRecord) error {
	var lowers []string
	for i := len(rec.Layers) - 1; i >= 0; i-- { // overlay wants the top layer first
		m, err := s.readLayerMeta(rec.Layers[i])
		if err != nil {
			return fmt.Errorf("layer %s: %v: %w", rec.Layers[i], err, errdefs.ErrFailedPrecondition)
		}
		lowers = append(lowers, "l/"+m.Link)
	}
	dir := "rootfs/" + rec.ContainerID
	if len(lowers) == 0 {
		// An image without layers: overlay needs a lower dir, so give it an empty one.
		if err := os.MkdirAll(s.path(dir, "empty"), 0o755); err != nil {
			return err
		}
		lowers = []string{dir + "/empty"}
	}
	opts := "lowerdir=" + strings.Join(lowers, ":") + ",upperdir=" + dir + "/upper,workdir=" + dir + "/work,index=off"
	if len(opts)+len(",volatile") >= os.Getpagesize() {
		return fmt.Errorf("image has too many layers (%d) for one overlay mount: %w", len(lowers), errdefs.ErrFailedPrecondition)
	}
	target := s.path(dir, "merged")
	// A volatile overlay left its mark in the work dir: overlay refuses to mount it again until
	// the mark is gone (its upper may have lost writes if the machine crashed; see mountOverlayOpts).
	if err := os.RemoveAll(s.path(dir, "work", "work", "incompat")); err != nil {
		return err
	}
	err := s.mountOverlayOpts(target, opts+",volatile")
	if errors.Is(err, unix.EINVAL) {
		err = s.mountOverlayOpts(target, opts) // a kernel before 5.10, without volatile
	}
	if err != nil {
		return fmt.Errorf("mount overlay for %s: %w", rec.ContainerID, err)
	}
	return nil
}

// Container overlays are mounted volatile: overlay then skips syncing its upper dir, which
// otherwise happens on every unmount as a syncfs of the whole file system holding the store
// (the node's disk, with every pod's logs and every pull on it) and made each RemoveContainer
// wait for it — about 5 ms on an idle node, much more on a busy one. What volatile gives up is the
// durability of a container's own writes to its rootfs across a machine crash; no one can read
// them after one anyway, since containers do not survive a reboot and the kubelet makes new ones
// with new rootfs. A daemon crash keeps the page cache, so nothing changes there.
func (s *Store) mountOverlayOpts(target, opts string) error {
	// The thread gets its own cwd (CLONE_FS) and ends with the call, so the chdir cannot leak
	// into other goroutines.
	return lockedthread.Run(func() error {
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			return err
		}
		if err := unix.Chdir(s.root); err != nil {
			return err
		}
		// nodev: device files an image carries cannot be opened through the container's rootfs.
		// Not nosuid: setuid programs of the image must work inside the container; the private
		// rootfs dir (makeRootfsDirs) keeps host users from running them through this mount.
		return unix.Mount("overlay", target, "overlay", unix.MS_NODEV, opts)
	})
}

// makeVolumeDirs creates each image volume as a directory inside the container's own rootfs and
// returns the volume paths cleaned. Paths are resolved inside root (symlinks included), so
// "/../../etc" or a symlink planted by the image can only ever name something under root.
func makeVolumeDirs(root string, vols map[string]struct{}) (map[string]struct{}, error) {
	if len(vols) == 0 {
		return vols, nil
	}
	out := make(map[string]struct{}, len(vols))
	keys := make([]string, 0, len(vols))
	for v := range vols {
		keys = append(keys, v)
	}
	sort.Strings(keys)
	for _, v := range keys {
		clean := path.Clean("/" + v)
		if clean == "/" {
			continue
		}
		if err := pathrs.MkdirAll(root, clean, 0o755); err != nil {
			return nil, fmt.Errorf("image volume %q: %v: %w", v, err, errdefs.ErrInvalidArgument)
		}
		out[clean] = struct{}{}
	}
	return out, nil
}

// RemoveRootfs unmounts and deletes a container's rootfs. A missing rootfs is not an error.
func (s *Store) RemoveRootfs(ctx context.Context, containerID string) error {
	if !fileid.Valid(containerID) {
		return fmt.Errorf("container ID %q: %w", containerID, errdefs.ErrInvalidArgument)
	}
	ml, err := s.metaLock()
	if err != nil {
		return err
	}
	defer ml.unlock()
	return s.unmountAndDelete(containerID)
}

func (s *Store) unmountAndDelete(id string) error {
	dir := s.rootfsDir(id)
	merged := filepath.Join(dir, "merged")
	for i := 0; ; i++ {
		mounted, err := mountinfo.Mounted(merged)
		if err != nil || !mounted {
			break
		}
		err = unix.Unmount(merged, 0)
		if errors.Is(err, unix.EBUSY) && i < 20 {
			time.Sleep(50 * time.Millisecond) // a process may still be leaving the container's mount
			continue
		}
		if err != nil {
			if err := unix.Unmount(merged, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
				return fmt.Errorf("unmount rootfs of %s: %w", id, err)
			}
		}
	}
	// Idmapped layer mounts are detached right after the overlay is mounted on them; one left by
	// a crash in between must go before anything is removed, or RemoveAll would reach into the
	// shared layers through it.
	if err := UnmountIdmapDir(filepath.Join(dir, "idmap")); err != nil {
		return fmt.Errorf("remove rootfs of %s: %w", id, err)
	}
	// Remove the record last: while it exists, the image stays in use.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != "rootfs.json" {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("remove rootfs of %s: %w", id, err)
			}
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove rootfs of %s: %w", id, err)
	}
	return nil
}
