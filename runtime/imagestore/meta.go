package imagestore

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/runtime/errdefs"
)

// Image is one stored image.
type Image struct {
	// ID is the config digest, "sha256:…".
	ID          string   `json:"id"`
	RepoTags    []string `json:"repoTags,omitempty"`
	RepoDigests []string `json:"repoDigests,omitempty"`
	// ManifestDigest is the digest of the platform manifest the layers came from.
	ManifestDigest string `json:"manifestDigest"`
	// Size is the bytes the registry sent: config plus compressed layers.
	Size   int64      `json:"size"`
	Layers []LayerRef `json:"layers"`
	// Updated orders records that both claim a tag after a crash between the two writes of a retag:
	// the newer one holds it.
	Updated time.Time `json:"updated"`
}

// LayerRef is one layer of an image.
type LayerRef struct {
	Digest    string `json:"digest"` // compressed blob digest
	DiffID    string `json:"diffID"` // uncompressed tar digest
	ChainID   string `json:"chainID"`
	Size      int64  `json:"size"`
	MediaType string `json:"mediaType,omitempty"`
}

// digestOf is the "sha256:<hex>" digest of b.
func digestOf(b []byte) string {
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

func (s *Store) recordPath(id string) string {
	h, _ := idHex(id)
	return s.path("images", h+".json")
}

// loadAll reads every image record and settles tags claimed twice (the newest record keeps the tag).
func (s *Store) loadAll() ([]*Image, error) {
	ents, err := os.ReadDir(s.path("images"))
	if err != nil {
		return nil, err
	}
	var imgs []*Image
	for _, e := range ents {
		h, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || len(h) != 64 || !isHex(h) {
			continue
		}
		img, err := s.readRecord("sha256:" + h)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // removed while we listed
			}
			return nil, err
		}
		imgs = append(imgs, img)
	}
	sort.Slice(imgs, func(i, j int) bool { return imgs[i].Updated.After(imgs[j].Updated) })
	seen := map[string]bool{}
	for _, img := range imgs {
		img.RepoTags = slices.DeleteFunc(img.RepoTags, func(t string) bool {
			dup := seen[t]
			seen[t] = true
			return dup
		})
	}
	sort.Slice(imgs, func(i, j int) bool { return imgs[i].ID < imgs[j].ID })
	return imgs, nil
}

func (s *Store) readRecord(id string) (*Image, error) {
	b, err := os.ReadFile(s.recordPath(id))
	if err != nil {
		return nil, err
	}
	var img Image
	if err := json.Unmarshal(b, &img); err != nil {
		return nil, fmt.Errorf("image record %s: %w", id, err)
	}
	return &img, nil
}

func (s *Store) writeRecord(img *Image) error {
	b, err := json.MarshalIndent(img, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(s.recordPath(img.ID), b, 0o600)
}

// List returns every stored image.
func (s *Store) List() ([]*Image, error) { return s.loadAll() }

// Get finds an image by tag, digest reference, full ID or unique ID prefix. A missing image is
// errdefs.ErrNotFound.
func (s *Store) Get(ref string) (*Image, error) {
	imgs, err := s.loadAll()
	if err != nil {
		return nil, err
	}
	return resolve(imgs, ref)
}

func resolve(imgs []*Image, ref string) (*Image, error) {
	if h, ok := idHex(ref); ok {
		for _, img := range imgs {
			if img.ID == "sha256:"+h {
				return img, nil
			}
		}
		if strings.HasPrefix(ref, "sha256:") {
			return nil, fmt.Errorf("image %q: %w", ref, errdefs.ErrNotFound)
		}
	}
	if r, err := parseRef(ref); err == nil {
		tag, repo := tagString(r), repoString(r)
		for _, img := range imgs {
			if tag != "" && slices.Contains(img.RepoTags, tag) {
				return img, nil
			}
			if d, ok := r.(name.Digest); ok {
				if slices.Contains(img.RepoDigests, repo+"@"+d.DigestStr()) ||
					(img.ManifestDigest == d.DigestStr() && hasRepo(img, repo)) {
					return img, nil
				}
			}
		}
	}
	// Docker also accepts a unique prefix of an image ID.
	if p := strings.TrimPrefix(ref, "sha256:"); len(p) >= 4 && isHex(p) {
		var found *Image
		for _, img := range imgs {
			if strings.HasPrefix(img.ID, "sha256:"+p) {
				if found != nil {
					return nil, fmt.Errorf("image ID prefix %q is ambiguous: %w", ref, errdefs.ErrInvalidArgument)
				}
				found = img
			}
		}
		if found != nil {
			return found, nil
		}
	}
	return nil, fmt.Errorf("image %q: %w", ref, errdefs.ErrNotFound)
}

func hasRepo(img *Image, repo string) bool {
	for _, t := range img.RepoTags {
		if i := strings.LastIndex(t, ":"); i > 0 && t[:i] == repo {
			return true
		}
	}
	for _, d := range img.RepoDigests {
		if r, _, ok := strings.Cut(d, "@"); ok && r == repo {
			return true
		}
	}
	return false
}

// Config reads the image's config blob.
func (s *Store) Config(img *Image) (*ocispec.Image, []byte, error) {
	raw, err := s.readBlob(img.ID)
	if err != nil {
		return nil, nil, err
	}
	var c ocispec.Image
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, nil, fmt.Errorf("image %s config: %w", img.ID, err)
	}
	return &c, raw, nil
}

func (s *Store) blobPath(digest string) (string, error) {
	h, ok := idHex(digest)
	if !ok || !strings.HasPrefix(digest, "sha256:") {
		return "", fmt.Errorf("digest %q: only sha256 is supported: %w", digest, errdefs.ErrInvalidArgument)
	}
	return s.path("blobs", "sha256", h), nil
}

func (s *Store) readBlob(digest string) ([]byte, error) {
	p, err := s.blobPath(digest)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("blob %s: %w", digest, errdefs.ErrNotFound)
	}
	return b, err
}

// writeBlob stores small verified content (manifests, configs) under its digest.
func (s *Store) writeBlob(digest string, b []byte) error {
	if digestOf(b) != digest {
		return fmt.Errorf("blob %s: content has digest %s: %w", digest, digestOf(b), errdefs.ErrInvalidArgument)
	}
	p, err := s.blobPath(digest)
	if err != nil {
		return err
	}
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	return atomicfile.Write(p, b, 0o600)
}

// commit records img under tag (may be "") and repoDigest, moving the tag off any other image.
// Blobs and layers must already be in place: a record is the last thing a pull makes visible.
func (s *Store) commit(img *Image, tag, repoDigest string) (*Image, error) {
	ml, err := s.metaLock()
	if err != nil {
		return nil, err
	}
	defer ml.unlock()
	imgs, err := s.loadAll()
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	rec := img
	for _, old := range imgs {
		if old.ID == img.ID {
			rec = old
			rec.Layers, rec.Size, rec.ManifestDigest = img.Layers, img.Size, img.ManifestDigest
		}
	}
	if tag != "" && !slices.Contains(rec.RepoTags, tag) {
		rec.RepoTags = append(rec.RepoTags, tag)
	}
	if repoDigest != "" && !slices.Contains(rec.RepoDigests, repoDigest) {
		rec.RepoDigests = append(rec.RepoDigests, repoDigest)
	}
	rec.Updated = now
	if err := s.writeRecord(rec); err != nil {
		return nil, err
	}
	if tag != "" {
		for _, old := range imgs {
			if old.ID != rec.ID && slices.Contains(old.RepoTags, tag) {
				old.RepoTags = slices.DeleteFunc(old.RepoTags, func(t string) bool { return t == tag })
				if err := s.writeRecord(old); err != nil {
					return nil, err
				}
			}
		}
	}
	return rec, nil
}
