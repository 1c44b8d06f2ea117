package imagestore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/moby/go-archive"
	"github.com/moby/go-archive/chrootarchive"
	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/internal/ctxio"
	"github.com/nodelet/nodelet/runtime/errdefs"
)

// layerMeta is layers/<chain>/layer.json.
type layerMeta struct {
	ChainID string `json:"chainID"`
	DiffID  string `json:"diffID"`
	// Link is the short name under l/ that points at diff/, used in overlay mount options.
	Link string `json:"link"`
	// Bytes and Inodes are what diff/ occupies on disk, measured once when it was unpacked.
	Bytes  int64 `json:"bytes"`
	Inodes int64 `json:"inodes"`
}

// chainIDs computes each layer's chain ID: the first is its diff ID, then sha256(parent + " " + diffID).
func chainIDs(diffIDs []string) []string {
	out := make([]string, len(diffIDs))
	for i, d := range diffIDs {
		if i == 0 {
			out[i] = d
			continue
		}
		out[i] = digestOf([]byte(out[i-1] + " " + d))
	}
	return out
}

func (s *Store) layerDir(chainID string) string {
	h, _ := idHex(chainID)
	return s.path("layers", h)
}

func (s *Store) readLayerMeta(chainID string) (*layerMeta, error) {
	b, err := os.ReadFile(filepath.Join(s.layerDir(chainID), "layer.json"))
	if err != nil {
		return nil, err
	}
	var m layerMeta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("layer %s: %w", chainID, err)
	}
	return &m, nil
}

// hasLayer reports whether the layer is completely unpacked: its directory appears by one rename
// only after diff/, layer.json and its short link exist.
func (s *Store) hasLayer(chainID string) bool {
	_, err := s.readLayerMeta(chainID)
	return err == nil
}

// decompress picks gzip, zstd or plain tar by the stream's magic number rather than trusting the
// media type, which registries and old tools get wrong.
func decompress(r io.Reader) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	magic, _ := br.Peek(4)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, err
		}
		return zr, nil
	case bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(1<<30))
		if err != nil {
			return nil, err
		}
		return zr.IOReadCloser(), nil
	}
	return io.NopCloser(br), nil
}

// unpackLayer unpacks one compressed layer stream into layers/<chainID>. The stream's uncompressed
// digest must equal diffID, or nothing becomes visible. Entries are extracted inside a chroot of the
// new directory (moby/go-archive's chrootarchive, which also resolves every path through os.Root),
// so no entry, symlink, hardlink or whiteout can reach outside it. Whiteouts are kept in overlay
// form (0/0 character devices, trusted.overlay.opaque) because each layer is its own lowerdir.
func (s *Store) unpackLayer(ctx context.Context, chainID, diffID string, compressed io.Reader) error {
	tmp, err := os.MkdirTemp(s.path("tmp"), "layer-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	diff := filepath.Join(tmp, "diff")
	if err := os.Mkdir(diff, 0o755); err != nil {
		return err
	}

	dec, err := decompress(ctxio.Reader(ctx, compressed))
	if err != nil {
		return fmt.Errorf("layer %s: decompress: %v: %w", diffID, err, errdefs.ErrInvalidArgument)
	}
	defer dec.Close()
	h := sha256.New()
	// The guard runs inside the extraction's chroot, where host paths mean nothing: it asks about
	// free space through a descriptor opened here.
	dirf, err := os.Open(tmp)
	if err != nil {
		return err
	}
	defer dirf.Close()
	tee := io.TeeReader(&sizeGuard{r: dec, max: s.maxLayer, reserve: s.reserve, dir: dirf}, h)
	if err := chrootarchive.UntarUncompressed(tee, diff, &archive.TarOptions{WhiteoutFormat: archive.OverlayWhiteoutFormat}); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, errdefs.ErrResourceExhausted) {
			return fmt.Errorf("layer %s: %w", diffID, err)
		}
		return fmt.Errorf("layer %s: unpack: %v: %w", diffID, err, errdefs.ErrInvalidArgument)
	}
	// The tar reader stops at the end-of-archive marker; the digest covers the padding after it too.
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return fmt.Errorf("layer %s: %v: %w", diffID, err, errdefs.ErrInvalidArgument)
	}
	// The compressed stream's verifier (digest and size against the manifest) speaks only at its end.
	if _, err := io.Copy(io.Discard, compressed); err != nil {
		return fmt.Errorf("layer %s: %v: %w", diffID, err, errdefs.ErrInvalidArgument)
	}
	if got := sumString(h); got != diffID {
		return fmt.Errorf("layer has diff ID %s, config says %s: %w", got, diffID, errdefs.ErrInvalidArgument)
	}

	bytesUsed, inodes := diskUsage(diff)
	link, err := s.makeLink(chainID)
	if err != nil {
		return err
	}
	meta := layerMeta{ChainID: chainID, DiffID: diffID, Link: link, Bytes: bytesUsed, Inodes: inodes}
	b, _ := json.Marshal(meta)
	if err := atomicfile.Write(filepath.Join(tmp, "layer.json"), b, 0o600); err != nil {
		return err
	}
	if err := syncTree(diff); err != nil {
		return err
	}
	if err := os.Rename(tmp, s.layerDir(chainID)); err != nil {
		if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) {
			os.Remove(s.path("l", link)) // another process won the race; keep its copy
			return nil
		}
		return err
	}
	return syncDir(s.path("layers"))
}

// makeLink creates l/<short> → ../layers/<chain>/diff. The link may dangle until the layer directory
// is renamed into place; dangling links are harmless and removed with their layer.
func (s *Store) makeLink(chainID string) (string, error) {
	h, _ := idHex(chainID)
	for range 10 {
		var b [6]byte
		rand.Read(b[:])
		short := strings.ToUpper(hex.EncodeToString(b[:]))
		err := os.Symlink("../layers/"+h+"/diff", s.path("l", short))
		if err == nil {
			return short, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", err
		}
	}
	return "", errors.New("could not pick a unique layer link name")
}

func sumString(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

// diskUsage measures what a tree occupies: allocated bytes and inodes, each hard-linked inode once.
func diskUsage(root string) (int64, int64) {
	seen := map[uint64]bool{}
	var bytesUsed, inodes int64
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		if st.Nlink > 1 {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		inodes++
		bytesUsed += st.Blocks * 512
		return nil
	})
	return bytesUsed, inodes
}

// syncTree flushes an unpacked layer before it becomes visible, so a crash cannot leave a
// published layer with missing data. One syncfs covers the whole filesystem cheaply.
func syncTree(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return syscallSyncfs(int(f.Fd()))
}

// sizeGuard stops an unpack that grows past the layer size cap, or would leave the store's
// filesystem with less than reserve bytes or fewer than inodeReserve inodes free. It looks at the
// filesystem every guardEvery bytes of tar: each entry takes at least a 512-byte header, so fewer
// than guardEvery/512 files can appear between two looks, well inside inodeReserve.
type sizeGuard struct {
	r            io.Reader
	max, reserve int64
	dir          *os.File
	n, next      int64
	err          error
}

const (
	guardEvery = 256 << 10
	// inodeReserve is what an unpack leaves free for everything else on the filesystem (the
	// containers' writable layers, the daemons' own state).
	inodeReserve = 4096
)

func (g *sizeGuard) Read(p []byte) (int, error) {
	// The error is sticky and comes with no data: readers such as io.ReadFull drop an error that
	// arrives together with enough bytes.
	if g.err != nil {
		return 0, g.err
	}
	n, err := g.r.Read(p)
	g.n += int64(n)
	if g.max > 0 && g.n > g.max {
		g.err = fmt.Errorf("layer is larger than the %d-byte limit: %w", g.max, errdefs.ErrResourceExhausted)
		return 0, g.err
	}
	if g.n >= g.next {
		g.next = g.n + guardEvery
		if g.err = g.checkFree(); g.err != nil {
			return 0, g.err
		}
	}
	return n, err
}

func (g *sizeGuard) checkFree() error {
	var st unix.Statfs_t
	if unix.Fstatfs(int(g.dir.Fd()), &st) != nil {
		return nil // the unpack's own writes will report a real problem
	}
	if g.reserve > 0 && int64(st.Bavail)*st.Bsize < g.reserve {
		return fmt.Errorf("layer would leave less than %d bytes free on the image filesystem: %w", g.reserve, errdefs.ErrResourceExhausted)
	}
	// Filesystems without a fixed inode table (btrfs) report none at all.
	if st.Files > 0 && st.Ffree < inodeReserve {
		return fmt.Errorf("layer would leave fewer than %d free inodes on the image filesystem (%d of %d free): %w",
			inodeReserve, st.Ffree, st.Files, errdefs.ErrResourceExhausted)
	}
	return nil
}
