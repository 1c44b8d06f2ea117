package oci

import (
	"errors"
	"os"

	"github.com/nodelet/nodelet/internal/regularfile"
)

// errNotRegular and errTooLarge are why readHostFile refused a file.
var (
	errNotRegular = regularfile.ErrNotRegular
	errTooLarge   = regularfile.ErrTooLarge
)

// readHostFile reads a file of the host named by a request or the machine's configuration (a
// seccomp profile, a security module's list) as a regular file of at most max bytes: a FIFO put in
// its place cannot hold the request and a device is never opened.
func readHostFile(path string, max int64) ([]byte, error) {
	b, err := regularfile.Read(path, max)
	var pe *os.PathError
	if errors.As(err, &pe) && pe.Op == "stat" {
		// Said as the open the caller asked for: "open <path>: no such file or directory".
		return nil, &os.PathError{Op: "open", Path: path, Err: pe.Err}
	}
	return b, err
}
