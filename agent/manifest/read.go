// Package manifest turns static pod manifests (files of the manifest folder, URL bodies) into
// validated, defaulted pods: it reads them bounded and without blocking, decodes them, fills what the
// API server would default, and refuses what it would refuse, before any field becomes a path.
package manifest

import (
	"fmt"
	"io"

	"github.com/nodelet/nodelet/internal/regularfile"
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
	ErrTooLarge = regularfile.ErrTooLarge
	// ErrNotRegularFile: a FIFO, device or socket (or a symlink to one) where a manifest file belongs.
	ErrNotRegularFile = regularfile.ErrNotRegular
)

// Read reads a regular file of at most MaxSize bytes, refusing anything else before reading a
// byte (regularfile.Read).
func Read(path string) ([]byte, error) { return regularfile.Read(path, MaxSize) }

// ReadCapped reads r to its end, refusing (without reading further) once it passes MaxSize;
// a response body has no size to check first.
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
