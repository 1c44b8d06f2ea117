package oci

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// errNotRegular and errTooLarge are why readHostFile refused a file.
var (
	errNotRegular = errors.New("not a regular file")
	errTooLarge   = errors.New("too large")
)

// readHostFile reads a file of the host named by a request or the machine's configuration (a
// seccomp profile, a security module's list): a regular file only, at most max bytes. It is
// stat'ed before the open so a device is never opened, and opened non-blocking so a FIFO put in
// its place cannot hold the request; the open file is checked again, as the path may have changed.
func readHostFile(path string, max int64) ([]byte, error) {
	if fi, err := os.Stat(path); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			// Said as the open the caller asked for: "open <path>: no such file or directory".
			return nil, &os.PathError{Op: "open", Path: path, Err: pe.Err}
		}
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, &os.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w (%s)", errNotRegular, modeKind(fi.Mode()))}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, &os.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w (%s)", errNotRegular, fileKind(st.Mode))}
	}
	if st.Size > max {
		return nil, &os.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: %d bytes, the limit is %d", errTooLarge, st.Size, max)}
	}
	// Files of pseudo file systems report no size, and any file may grow after the fstat: read one
	// byte past the bound to notice.
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(b)) > max {
		return nil, &os.PathError{Op: "read", Path: path, Err: fmt.Errorf("%w: more than %d bytes", errTooLarge, max)}
	}
	return b, nil
}

func modeKind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "FIFO"
	case m&os.ModeCharDevice != 0:
		return "character device"
	case m&os.ModeDevice != 0:
		return "block device"
	case m.IsDir():
		return "directory"
	case m&os.ModeSocket != 0:
		return "socket"
	}
	return "special file"
}
