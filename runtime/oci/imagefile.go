package oci

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/cyphar/filepath-securejoin/pathrs-lite"
	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// maxImageFileSize bounds what the runtime reads of one file of an image. Real passwd and group
// files are a few KiB; the bound only has to keep a hostile image from filling the daemon's memory.
const maxImageFileSize = 4 << 20

// ErrUnsafeImageFile is wrapped by the errors of image files the runtime will not read: anything
// but a regular file of bounded size. It also wraps errdefs.ErrFailedPrecondition, the image
// being unusable as it is.
var ErrUnsafeImageFile = fmt.Errorf("image file is not a regular file of bounded size: %w", errdefs.ErrFailedPrecondition)

// readImageFile reads name from the image's rootfs. The image is untrusted: the path is resolved
// inside rootfs (its symlinks cannot lead to the host's files), and only a regular file is opened
// for reading, non-blocking, so a FIFO, a device or an endless file fails at once instead of
// holding CreateContainer forever. A missing file is fs.ErrNotExist.
func readImageFile(rootfs, name string) ([]byte, error) {
	h, err := pathrs.OpenInRoot(rootfs, name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, fmt.Errorf("image file %s: %v: %w", name, err, ErrUnsafeImageFile)
	}
	defer h.Close()
	// Checked on the O_PATH handle, before any open that a device or FIFO would act on.
	if err := checkRegular(h, name); err != nil {
		return nil, err
	}
	f, err := pathrs.Reopen(h, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("image file %s: %v: %w", name, err, ErrUnsafeImageFile)
	}
	defer f.Close()
	if err := checkRegular(f, name); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, maxImageFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("image file %s: %w", name, err)
	}
	if len(b) > maxImageFileSize {
		return nil, fmt.Errorf("image file %s is larger than %d bytes: %w", name, maxImageFileSize, ErrUnsafeImageFile)
	}
	return b, nil
}

func checkRegular(f *os.File, name string) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("image file %s: %w", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return fmt.Errorf("image file %s is a %s: %w", name, fileKind(st.Mode), ErrUnsafeImageFile)
	}
	if st.Size > maxImageFileSize {
		return fmt.Errorf("image file %s is %d bytes, more than %d: %w", name, st.Size, maxImageFileSize, ErrUnsafeImageFile)
	}
	return nil
}

func fileKind(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "FIFO"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFDIR:
		return "directory"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFLNK:
		return "symlink"
	}
	return "special file"
}
