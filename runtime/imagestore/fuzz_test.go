package imagestore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"testing"
)

// FuzzUnpackLayer applies any bytes as an uncompressed layer: the unpack never panics and never
// writes outside the store, whatever paths, links or whiteouts the tar holds.
func FuzzUnpackLayer(f *testing.F) {
	f.Add(tarOf(f, dir("a"), file("a/b", "x"), symlink("a/c", "../../outside/x"), hardlink("a/d", "a/b")))
	f.Add(tarOf(f, file("../outside/x", "owned")))
	f.Add(tarOf(f, symlink("l", "/"), file("l/outside/x", "owned")))
	f.Add(tarOf(f, dir("w"), file("w/.wh..wh..opq", ""), file(".wh.w", "")))
	f.Add([]byte{})
	// No tmpfs under the store here: the fuzzing engine kills its workers when the time is up, and
	// their mounts would outlive them.
	sb := newSandbox(f)
	s := openStore(f, sb.store)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<20 {
			return // large inputs only slow the search; the size guards have their own tests
		}
		sum := sha256.Sum256(data)
		diffID := "sha256:" + hex.EncodeToString(sum[:])
		if err := s.unpackLayer(ctxT(t), diffID, diffID, bytes.NewReader(data)); err == nil {
			// A tar that unpacked is published; drop it so every input starts from the same store.
			if err := os.RemoveAll(s.layerDir(diffID)); err != nil {
				t.Fatal(err)
			}
		}
		sb.checkOutside(t, "/outside")
	})
}
