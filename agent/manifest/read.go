// Package manifest turns static pod manifests (files of the manifest folder, URL bodies) into
// validated, defaulted pods: it reads them bounded and without blocking, decodes them, fills what the
// API server would default, and refuses what it would refuse, before any field becomes a path.
package manifest

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// MaxSize bounds what a source reads of one manifest file or URL body: the API server's
// limit on a request body (3 MiB), so nothing it would take in one request is refused here. Real
// static pods are a few KiB; the bound keeps a hostile or mistaken source (a symlink to /dev/zero,
// an endless response) from growing the agent until it dies, and caps the decoding work too (a
// manifest at the limit made of many small YAML nodes still costs a few hundred MiB of allocation).
const MaxSize = 3 << 20

// Errors a source reports for a manifest it refuses; the other manifests go on.
var (
	// ErrTooLarge: the file or body exceeds MaxSize.
	ErrTooLarge = errors.New("manifest too large")
	// ErrNotRegularFile: a FIFO, device or socket (or a symlink to one) where a manifest file belongs.
	ErrNotRegularFile = errors.New("not a regular file")
)

// Read reads a regular file of at most MaxSize bytes. It refuses anything
// else before reading a byte: it never blocks on a FIFO (the open is non-blocking and the opened
// fd is checked, so a file swapped after the stat is caught too), never reads a device, and never
// holds more than the limit in memory.
func Read(path string) ([]byte, error) {
	// Stat first so a device is never opened: opening some has side effects.
	if fi, err := os.Stat(path); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w: %s", path, ErrNotRegularFile, fileKind(fi.Mode()))
	}
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w: %s", path, ErrNotRegularFile, fileKind(fi.Mode()))
	}
	if fi.Size() > MaxSize {
		return nil, fmt.Errorf("%s: %w: %d bytes, the limit is %d", path, ErrTooLarge, fi.Size(), MaxSize)
	}
	data, err := ReadCapped(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, nil
}

// ReadCapped reads r to its end, refusing (without reading further) once it passes MaxSize;
// a regular file can grow after its fstat.
func ReadCapped(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSize {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, MaxSize)
	}
	return data, nil
}

// fileKind names a non-regular file's type for the error a person reads.
func fileKind(m os.FileMode) string {
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
	}
	return "an irregular file"
}
