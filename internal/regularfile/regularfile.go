// Package regularfile reads files nodelet does not control — manifests, the node's hosts file,
// what a container left in its termination message file — as regular files only: a FIFO never
// blocks the open, a device is never opened, and no more than a bound is ever held in memory.
package regularfile

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

var (
	// ErrNotRegular: a FIFO, device, socket or directory (or, where links are refused, a symlink).
	ErrNotRegular = errors.New("not a regular file")
	// ErrTooLarge: the file holds more than the caller's bound.
	ErrTooLarge = errors.New("too large")
)

// Read reads the regular file at path (following symlinks) if it holds at most max bytes.
func Read(path string, max int64) ([]byte, error) {
	// Stat first so a device is never opened: opening some has side effects.
	if fi, err := os.Stat(path); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, notRegular(path, fi.Mode())
	}
	f, fi, err := open(path, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi.Size() > max {
		return nil, &os.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, fi.Size(), max)}
	}
	// The file can grow after the fstat: read one byte past the bound to notice.
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(data)) > max {
		return nil, &os.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: more than %d bytes", ErrTooLarge, max)}
	}
	return data, nil
}

// ReadTail reads at most the last max bytes of the regular file at path, refusing a symlink
// rather than following it: for files someone else may replace (a container writes its
// termination message file).
func ReadTail(path string, max int64) ([]byte, error) {
	f, fi, err := open(path, unix.O_NOFOLLOW)
	if errors.Is(err, unix.ELOOP) {
		return nil, notRegular(path, os.ModeSymlink)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, min(fi.Size(), max))
	n, err := f.ReadAt(buf, fi.Size()-int64(len(buf)))
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	return buf[:n], nil
}

// open opens path without blocking and checks what was opened, so a file swapped after a stat is
// caught too.
func open(path string, flags int) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC|flags, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = notRegular(path, fi.Mode())
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// notRegular is an *os.PathError, so a caller can show the reason without the host path.
func notRegular(path string, m os.FileMode) error {
	return &os.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w: %s", ErrNotRegular, kind(m))}
}

// kind names a non-regular file's type for the error a person reads.
func kind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a directory"
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "an irregular file"
}
