package volumemanager

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// removeAll removes dir and everything below it without ever crossing a mount: each folder is
// opened from its parent's descriptor with RESOLVE_NO_XDEV, which refuses any mount point (a bind
// of a folder on the same filesystem included), and the kernel refuses to unlink one. So what a
// mount left behind shows is never deleted through it (a hostPath bound under a subPath keeps the
// host's files) and an ErrMounted error says where, with no read of the whole mount table: that
// read made deleting many pods at once quadratic.
func removeAll(dir string) error {
	dir = filepath.Clean(dir)
	parent, err := os.Open(filepath.Dir(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer parent.Close()
	return removeAt(int(parent.Fd()), filepath.Base(dir), dir)
}

// removeAt removes name, below the folder open at dirfd; path names it in errors.
func removeAt(dirfd int, name, path string) error {
	err := unix.Unlinkat(dirfd, name, 0)
	switch {
	case err == nil, errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.EBUSY):
		return fmt.Errorf("%s: %w", path, ErrMounted)
	case !errors.Is(err, unix.EISDIR):
		return fmt.Errorf("remove %s: %w", path, err)
	}
	fd, err := unix.Openat2(dirfd, name, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_BENEATH,
	})
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%s: %w", path, ErrMounted)
	case err != nil:
		return fmt.Errorf("open %s: %w", path, err)
	}
	d := os.NewFile(uintptr(fd), path)
	defer d.Close()
	for {
		names, err := d.Readdirnames(1024)
		for _, n := range names {
			if err := removeAt(fd, n, filepath.Join(path, n)); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) || err == nil && len(names) == 0 {
			break
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
	}
	err = unix.Unlinkat(dirfd, name, unix.AT_REMOVEDIR)
	switch {
	case err == nil, errors.Is(err, unix.ENOENT):
		return nil
	case errors.Is(err, unix.EBUSY):
		return fmt.Errorf("%s: %w", path, ErrMounted)
	}
	return fmt.Errorf("remove %s: %w", path, err)
}

// isMountRoot tells whether path itself is the root of a mount (statx's STATX_ATTR_MOUNT_ROOT),
// a symlink at path not followed.
func isMountRoot(path string) (bool, error) {
	var st unix.Statx_t
	err := unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC, unix.STATX_BASIC_STATS, &st)
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if st.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT == 0 {
		return false, fmt.Errorf("statx %s: the kernel does not report mount roots (Linux 5.8 or later is needed)", path)
	}
	return st.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0, nil
}
