package imagestore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/internal/fileid"
)

// RootfsDir holds the containers' rootfs dirs (rootfs/<id>/merged is one's mount).
func (s *Store) RootfsDir() string { return s.path("rootfs") }

// RemountIdmapped remounts the overlay of a container prepared by PrepareRootfs (and not yet
// used) on idmapped mounts of its layers, mapped by the user namespace at usernsPath: a file the
// store holds as uid 0 is then uid 0 inside that namespace. Overlayfs itself cannot be idmapped,
// its layers can (Linux 5.19+ on file systems that allow idmapped mounts). The upper dir is not
// idmapped (overlay makes its work dirs there as the mounter, host root, which an idmapped
// mount cannot represent); what the container writes lands there under its host ids, and the
// upper dir's root is given to rootUID:rootGID, the host ids of the namespace's root, as the
// merged root dir takes its owner from it.
// The idmapped mounts are attached under rootfs/<id>/idmap only while the overlay is mounted on
// them, then detached: the overlay keeps them alive.
func (s *Store) RemountIdmapped(containerID, usernsPath string, rootUID, rootGID int) (retErr error) {
	if !fileid.Valid(containerID) {
		return fmt.Errorf("container ID %q: %w", containerID, errdefs.ErrInvalidArgument)
	}
	lk, err := s.sharedLock()
	if err != nil {
		return err
	}
	defer lk.unlock()
	rec, err := s.readRootfsRecord(containerID)
	if err != nil {
		return err
	}
	userns, err := os.Open(usernsPath)
	if err != nil {
		return fmt.Errorf("idmap rootfs: %w", err)
	}
	defer userns.Close()
	dir := "rootfs/" + containerID
	idmapDir := dir + "/idmap"
	if err := os.MkdirAll(s.path(idmapDir), 0o700); err != nil {
		return err
	}
	defer func() {
		if err := UnmountIdmapDir(s.path(idmapDir)); err != nil && retErr == nil {
			retErr = err
		}
	}()
	attach := func(src, name string) (string, error) {
		rel := idmapDir + "/" + name
		return rel, AttachIdmapped(s.path(src), s.path(rel), userns)
	}
	var lowers []string
	for i := len(rec.Layers) - 1; i >= 0; i-- { // overlay wants the top layer first
		m, err := s.readLayerMeta(rec.Layers[i])
		if err != nil {
			return fmt.Errorf("layer %s: %v: %w", rec.Layers[i], err, errdefs.ErrFailedPrecondition)
		}
		rel, err := attach("l/"+m.Link, strconv.Itoa(i))
		if err != nil {
			return err
		}
		lowers = append(lowers, rel)
	}
	if len(lowers) == 0 {
		if err := os.MkdirAll(s.path(dir, "empty"), 0o755); err != nil {
			return err
		}
		lowers = []string{dir + "/empty"}
	}
	if err := os.Chown(s.path(dir, "upper"), rootUID, rootGID); err != nil {
		return err
	}
	if err := shareWithMappedRoot(s.path(dir), rootGID); err != nil {
		return err
	}
	rw := dir
	merged := s.path(dir, "merged")
	if err := unix.Unmount(merged, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("idmap rootfs: unmount %s: %w", merged, err)
	}
	if err := os.RemoveAll(s.path(dir, "work", "work", "incompat")); err != nil {
		return err
	}
	opts := "lowerdir=" + joinColon(lowers) + ",upperdir=" + rw + "/upper,workdir=" + rw + "/work,index=off"
	if len(opts)+len(",volatile") >= os.Getpagesize() {
		return fmt.Errorf("image has too many layers (%d) for one overlay mount: %w", len(lowers), errdefs.ErrFailedPrecondition)
	}
	err = s.mountOverlayOpts(merged, opts+",volatile")
	if errors.Is(err, unix.EINVAL) {
		err = s.mountOverlayOpts(merged, opts)
	}
	if err != nil {
		return fmt.Errorf("mount idmapped overlay for %s: %w", containerID, err)
	}
	return nil
}

// shareWithMappedRoot lets the pod's mapped root search the private rootfs dir, through which
// the OCI runtime (from inside the user namespace) reaches merged/: group search for the
// namespace's root group, nothing for anyone else.
func shareWithMappedRoot(dir string, rootGID int) error {
	if err := os.Chown(dir, 0, rootGID); err != nil {
		return err
	}
	return os.Chmod(dir, 0o710)
}

// AttachIdmapped mounts a clone of the mount at src (just that subtree, without submounts) on
// target, a directory it makes, idmapped by the user namespace userns.
func AttachIdmapped(src, target string, userns *os.File) error {
	if err := os.Mkdir(target, 0o700); err != nil {
		return err
	}
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC)
	if err != nil {
		return fmt.Errorf("idmap %s: open_tree: %w", src, err)
	}
	defer unix.Close(fd)
	attr := unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(userns.Fd())}
	if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr); err != nil {
		return fmt.Errorf("idmap %s: mount_setattr: %w", src, err)
	}
	if err := unix.MoveMount(fd, "", unix.AT_FDCWD, target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return fmt.Errorf("idmap %s: move_mount: %w", src, err)
	}
	return nil
}

func joinColon(p []string) string {
	out := ""
	for i, e := range p {
		if i > 0 {
			out += ":"
		}
		out += e
	}
	return out
}

// UnmountIdmapDir detaches every mount under dir (the idmapped layers of one container, as
// AttachIdmapped made them, or the idmapped volume clones of one) and removes their mount points.
// It fails, rather than leave one attached, if any cannot be unmounted; it never removes
// recursively, so nothing is deleted through a mount still attached.
func UnmountIdmapDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		for i := 0; i < 4; i++ {
			err := unix.Unmount(p, unix.MNT_DETACH)
			if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
				break
			}
			if err != nil {
				return fmt.Errorf("unmount idmapped layer %s: %w", p, err)
			}
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}
