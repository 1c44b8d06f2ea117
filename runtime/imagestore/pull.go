package imagestore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sync/errgroup"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// Progress is a snapshot of one pull, reported as it advances.
type Progress struct {
	Layers, LayersDone int
	// Bytes is the compressed size of the layers still to fetch; BytesDone counts what arrived.
	Bytes, BytesDone int64
}

// PullOptions tunes one pull.
type PullOptions struct {
	Auth *Auth
	// Progress, if set, is called from the pulling goroutines (it must be quick and safe for
	// concurrent use).
	Progress func(Progress)
}

// Pull fetches ref (tag or digest, short names as Docker reads them) and stores it. Pulls of the same
// reference with the same credentials at the same time share one download.
func (s *Store) Pull(ctx context.Context, ref string, o PullOptions) (*Image, error) {
	r, err := parseRef(ref)
	if err != nil {
		return nil, err
	}
	key := r.Name() + "\x00" + o.Auth.key()
	return s.pulls.do(ctx, key, func(ctx context.Context) (*Image, error) {
		return s.pull(ctx, r, o)
	})
}

func (s *Store) pull(ctx context.Context, r name.Reference, o PullOptions) (*Image, error) {
	eps, err := s.endpoints(r)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, ep := range eps {
		img, err := s.pullFrom(ctx, r, ep, o)
		if err == nil {
			return img, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if errors.Is(err, errdefs.ErrInvalidArgument) && !ep.mirror {
			return nil, err
		}
		s.log.Info("pull attempt failed", "image", r.String(), "from", ep.ref.Context().RegistryStr(), "err", err)
		errs = append(errs, fmt.Errorf("from %s: %w", ep.ref.Context().RegistryStr(), err))
	}
	return nil, fmt.Errorf("pull %s: %w", r, errors.Join(errs...))
}

func (s *Store) pullFrom(ctx context.Context, r name.Reference, ep endpoint, o PullOptions) (*Image, error) {
	authn, err := o.Auth.authenticator()
	if err != nil {
		return nil, err
	}
	if ep.mirror {
		authn = nil // the caller's credential is for the registry itself, not for its mirrors
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithTransport(ep.rt), remote.WithPlatform(s.platform)}
	if authn != nil {
		opts = append(opts, remote.WithAuth(authn))
	}
	desc, err := remote.Get(ep.ref, opts...)
	if err != nil {
		return nil, classify(err)
	}
	var img v1.Image
	switch {
	case desc.MediaType.IsIndex():
		img, err = s.pickPlatform(desc)
	case desc.MediaType.IsImage():
		img, err = desc.Image()
	case desc.MediaType == types.DockerManifestSchema1 || desc.MediaType == types.DockerManifestSchema1Signed:
		err = fmt.Errorf("%s is a Docker schema 1 manifest, which is not supported: %w", r, errdefs.ErrInvalidArgument)
	default:
		err = fmt.Errorf("%s has media type %q, not an image: %w", r, desc.MediaType, errdefs.ErrInvalidArgument)
	}
	if err != nil {
		return nil, classify(err)
	}
	// The repo digest names what the reference resolved to: the index for a multi-platform image.
	repoDigest := repoString(r) + "@" + desc.Digest.String()
	return s.store(ctx, img, tagString(r), repoDigest, o.Progress)
}

// pickPlatform chooses this machine's image from an index, with a clear error when it has none.
func (s *Store) pickPlatform(desc *remote.Descriptor) (v1.Image, error) {
	idx, err := desc.ImageIndex()
	if err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	var have []string
	for _, m := range im.Manifests {
		if m.Platform == nil {
			continue
		}
		if m.Platform.Satisfies(s.platform) && m.MediaType.IsImage() {
			if m.Size > maxManifestBytes {
				return nil, fmt.Errorf("image index %s: manifest %s is %d bytes: %w", desc.Digest, m.Digest, m.Size, errManifestTooLarge)
			}
			return idx.Image(m.Digest)
		}
		have = append(have, m.Platform.String())
	}
	return nil, fmt.Errorf("image index %s has no image for platform %s (it has %s): %w",
		desc.Digest, s.platform.String(), strings.Join(have, ", "), errdefs.ErrNotFound)
}

// classify maps registry errors to the runtime's error kinds.
func classify(err error) error {
	if errors.Is(err, errdefs.ErrResourceExhausted) {
		return err // a limit of ours, not the registry's failure
	}
	var te *transport.Error
	if errors.As(err, &te) {
		switch te.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("%v: %w", err, errdefs.ErrNotFound)
		case http.StatusUnauthorized, http.StatusForbidden:
			return fmt.Errorf("%v: %w", err, errdefs.ErrFailedPrecondition)
		}
		return fmt.Errorf("%v: %w", err, errdefs.ErrUnavailable)
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return fmt.Errorf("%v: %w", err, errdefs.ErrUnavailable)
	}
	return err
}

// store brings every missing layer of img into the store, then commits its record. Called by pulls
// and imports alike. The shared lock only keeps another process's start-up from sweeping tmp/
// under us; GC is held off by the pin, so removing images never waits for a long pull.
func (s *Store) store(ctx context.Context, img v1.Image, tag, repoDigest string, progress func(Progress)) (*Image, error) {
	lk, err := s.sharedLock()
	if err != nil {
		return nil, err
	}
	defer lk.unlock()

	mf, err := img.Manifest()
	if err != nil {
		return nil, classify(err)
	}
	rawMf, err := img.RawManifest()
	if err != nil {
		return nil, classify(err)
	}
	// The config is read whole: its size is checked against the manifest's word before any of it
	// is fetched (the fetch itself then holds the registry to that word).
	if mf.Config.Size < 0 {
		return nil, fmt.Errorf("image config size %d: %w", mf.Config.Size, errdefs.ErrInvalidArgument)
	}
	if mf.Config.Size > maxConfigBytes {
		return nil, fmt.Errorf("image config %s is %d bytes, more than the %d-byte limit: %w",
			mf.Config.Digest, mf.Config.Size, maxConfigBytes, errdefs.ErrResourceExhausted)
	}
	rawCfg, err := img.RawConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image config: %w", classify(err))
	}
	if got := digestOf(rawCfg); got != mf.Config.Digest.String() || int64(len(rawCfg)) != mf.Config.Size {
		return nil, fmt.Errorf("image config is %s (%d bytes), manifest says %s (%d bytes): %w",
			got, len(rawCfg), mf.Config.Digest, mf.Config.Size, errdefs.ErrInvalidArgument)
	}
	var cfg v1.ConfigFile
	if err := json.Unmarshal(rawCfg, &cfg); err != nil {
		return nil, fmt.Errorf("image config: %v: %w", err, errdefs.ErrInvalidArgument)
	}
	if cfg.OS != "" && cfg.OS != s.platform.OS {
		return nil, fmt.Errorf("image is for %s/%s, this node is %s: %w", cfg.OS, cfg.Architecture, s.platform, errdefs.ErrInvalidArgument)
	}
	if len(cfg.RootFS.DiffIDs) != len(mf.Layers) {
		return nil, fmt.Errorf("manifest has %d layers, config lists %d diff IDs: %w",
			len(mf.Layers), len(cfg.RootFS.DiffIDs), errdefs.ErrInvalidArgument)
	}
	diffIDs := make([]string, len(mf.Layers))
	for i, d := range cfg.RootFS.DiffIDs {
		if _, ok := idHex(d.String()); !ok || d.Algorithm != "sha256" {
			return nil, fmt.Errorf("diff ID %q: %w", d, errdefs.ErrInvalidArgument)
		}
		diffIDs[i] = d.String()
	}
	chains := chainIDs(diffIDs)
	unpin, err := s.pinLayers(chains)
	if err != nil {
		return nil, err
	}
	defer unpin()

	rec := &Image{ID: mf.Config.Digest.String(), ManifestDigest: digestOf(rawMf), Size: mf.Config.Size}
	var p Progress
	var todo []int
	for i, l := range mf.Layers {
		rec.Layers = append(rec.Layers, LayerRef{Digest: l.Digest.String(), DiffID: diffIDs[i], ChainID: chains[i], Size: l.Size, MediaType: string(l.MediaType)})
		rec.Size += l.Size
		if !s.hasLayer(chains[i]) {
			todo = append(todo, i)
			p.Bytes += l.Size
		}
	}
	p.Layers = len(todo)
	var done atomic.Int64
	var layersDone atomic.Int32
	report := func() {
		if progress != nil {
			progress(Progress{Layers: p.Layers, LayersDone: int(layersDone.Load()), Bytes: p.Bytes, BytesDone: done.Load()})
		}
	}
	report()

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.parallel)
	for _, i := range todo {
		desc := mf.Layers[i]
		g.Go(func() error {
			_, err := s.layers.do(gctx, chains[i], func(ctx context.Context) (struct{}, error) {
				if s.hasLayer(chains[i]) {
					return struct{}{}, nil
				}
				l, err := img.LayerByDigest(desc.Digest)
				if err != nil {
					return struct{}{}, classify(err)
				}
				rc, err := l.Compressed()
				if err != nil {
					return struct{}{}, classify(err)
				}
				defer rc.Close()
				cr := &countingReader{r: rc, n: &done, report: report}
				if err := s.unpackLayer(ctx, chains[i], diffIDs[i], cr); err != nil {
					return struct{}{}, fmt.Errorf("layer %s: %w", desc.Digest, err)
				}
				return struct{}{}, nil
			})
			if err == nil {
				layersDone.Add(1)
				report()
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := s.writeBlob(rec.ManifestDigest, rawMf); err != nil {
		return nil, err
	}
	if err := s.writeBlob(rec.ID, rawCfg); err != nil {
		return nil, err
	}
	return s.commit(rec, tag, repoDigest)
}

type countingReader struct {
	r       io.Reader
	n       *atomic.Int64
	report  func()
	pending int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	c.pending += int64(n)
	if c.pending >= 1<<20 || err != nil {
		c.pending = 0
		c.report()
	}
	return n, err
}
