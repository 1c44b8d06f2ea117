package imagestore

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// Import loads every image of a docker-archive (`docker save`) or OCI-layout tarball, for machines
// without a registry. Tags come from the archive (RepoTags, or the OCI ref-name annotations).
func (s *Store) Import(ctx context.Context, file string) ([]*Image, error) {
	// Held while our files sit in tmp/, so another process's Open does not sweep them away.
	lk, err := s.sharedLock()
	if err != nil {
		return nil, err
	}
	defer lk.unlock()
	plain, cleanup, err := s.decompressedCopy(file)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	file = plain
	names, err := tarNames(file)
	if err != nil {
		return nil, err
	}
	switch {
	case names["manifest.json"]:
		return s.importDocker(ctx, file)
	case names["index.json"] && names["oci-layout"]:
		return s.importOCI(ctx, file)
	}
	return nil, fmt.Errorf("%s is neither a docker-archive (manifest.json) nor an OCI layout (index.json, oci-layout): %w", file, errdefs.ErrInvalidArgument)
}

// decompressedCopy returns file itself when it is a plain tar, else a decompressed copy in tmp/
// (`docker save | gzip` is a common way to carry images).
func (s *Store) decompressedCopy(file string) (string, func(), error) {
	f, err := os.Open(file)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	var magic [4]byte
	n, _ := io.ReadFull(f, magic[:])
	gz := n >= 2 && magic[0] == 0x1f && magic[1] == 0x8b
	zst := n == 4 && magic == [4]byte{0x28, 0xb5, 0x2f, 0xfd}
	if !gz && !zst {
		return file, func() {}, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return "", nil, err
	}
	dec, err := decompress(f)
	if err != nil {
		return "", nil, fmt.Errorf("%s: %v: %w", file, err, errdefs.ErrInvalidArgument)
	}
	defer dec.Close()
	out, err := os.CreateTemp(s.path("tmp"), "import-*.tar")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.Remove(out.Name()) }
	_, err = io.Copy(out, dec)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		cleanup()
		return "", nil, fmt.Errorf("%s: %v: %w", file, err, errdefs.ErrInvalidArgument)
	}
	return out.Name(), cleanup, nil
}

func tarNames(file string) (map[string]bool, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]bool{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v: %w", file, err, errdefs.ErrInvalidArgument)
		}
		out[path.Clean(h.Name)] = true
	}
}

func (s *Store) importDocker(ctx context.Context, file string) ([]*Image, error) {
	opener := func() (io.ReadCloser, error) { return os.Open(file) }
	mf, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %w", file, err, errdefs.ErrInvalidArgument)
	}
	var out []*Image
	for _, d := range mf {
		var tag *name.Tag
		if len(d.RepoTags) > 0 {
			t, err := name.NewTag(d.RepoTags[0])
			if err != nil {
				return nil, fmt.Errorf("%s: tag %q: %v: %w", file, d.RepoTags[0], err, errdefs.ErrInvalidArgument)
			}
			tag = &t
		}
		img, err := tarball.Image(opener, tag)
		if err != nil {
			return nil, fmt.Errorf("%s: %v: %w", file, err, errdefs.ErrInvalidArgument)
		}
		tags := []string{""}
		if len(d.RepoTags) > 0 {
			tags = tags[:0]
			for _, t := range d.RepoTags {
				r, err := parseRef(t)
				if err != nil {
					return nil, err
				}
				tags = append(tags, tagString(r))
			}
		}
		rec, err := s.store(ctx, img, tags[0], "", nil)
		if err != nil {
			return nil, err
		}
		for _, t := range tags[1:] {
			if rec, err = s.commit(rec, t, ""); err != nil {
				return nil, err
			}
		}
		out = append(out, rec)
	}
	return out, nil
}

func (s *Store) importOCI(ctx context.Context, file string) ([]*Image, error) {
	dir, err := os.MkdirTemp(s.path("tmp"), "import-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := untarPlain(file, dir); err != nil {
		return nil, err
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %w", file, err, errdefs.ErrInvalidArgument)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("%s: %v: %w", file, err, errdefs.ErrInvalidArgument)
	}
	var out []*Image
	for _, m := range im.Manifests {
		var img v1.Image
		switch {
		case m.MediaType.IsImage():
			img, err = idx.Image(m.Digest)
		case m.MediaType.IsIndex():
			var child v1.ImageIndex
			if child, err = idx.ImageIndex(m.Digest); err == nil {
				img, err = s.pickFromIndex(child)
			}
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		tag := ""
		refName := m.Annotations["io.containerd.image.name"]
		if refName == "" {
			refName = m.Annotations["org.opencontainers.image.ref.name"]
		}
		if refName != "" {
			if r, err := parseRef(refName); err == nil {
				tag = tagString(r)
			}
		}
		rec, err := s.store(ctx, img, tag, "", nil)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

func (s *Store) pickFromIndex(idx v1.ImageIndex) (v1.Image, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, m := range im.Manifests {
		if m.Platform != nil && m.Platform.Satisfies(s.platform) && m.MediaType.IsImage() {
			return idx.Image(m.Digest)
		}
	}
	return nil, fmt.Errorf("image index has no image for %s: %w", s.platform.String(), errdefs.ErrNotFound)
}

// untarPlain extracts an OCI layout: only regular files and directories, every path confined to dir
// by os.Root.
func untarPlain(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %v: %w", file, err, errdefs.ErrInvalidArgument)
		}
		n := path.Clean(h.Name)
		if !filepath.IsLocal(n) {
			return fmt.Errorf("%s: entry %q leaves the archive: %w", file, h.Name, errdefs.ErrInvalidArgument)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(n, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if d := path.Dir(n); d != "." {
				if err := root.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
			w, err := root.OpenFile(n, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			_, err = io.Copy(w, tr)
			w.Close()
			if err != nil {
				return fmt.Errorf("%s: %v: %w", file, err, errdefs.ErrInvalidArgument)
			}
		}
	}
}
