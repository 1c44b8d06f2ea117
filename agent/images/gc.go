package images

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Containers lists the runtime's containers, whose images are in use (running or not: a dead
// container's image is needed to restart it), and tells their mounts: an image volume's image is
// in use too.
type Containers interface {
	ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error)
	ContainerStatus(ctx context.Context, in *runtimeapi.ContainerStatusRequest, opts ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error)
}

// GCPolicy is the kubelet's image GC policy.
type GCPolicy struct {
	// HighThresholdPercent of the image filesystem used starts a collection; 100 disables it.
	HighThresholdPercent int
	// LowThresholdPercent is what a collection frees down to.
	LowThresholdPercent int
	// MinAge: an image seen for less than this is never removed.
	MinAge time.Duration
}

// DefaultGCPolicy is the kubelet's: 85%, 80%, 2 minutes.
var DefaultGCPolicy = GCPolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute}

// ErrNotEnoughFreed: the collection removed every image it could and usage is still above the low mark.
var ErrNotEnoughFreed = errors.New("image garbage collection freed too little")

// ImageGC removes unused images, least recently used first, when the image filesystem fills up.
// What "recently used" means is this agent's memory since it started (as the kubelet's): images
// first seen unused count as never used, and MinAge keeps a fresh pull safe until a container uses it.
type ImageGC struct {
	Images     ImageService
	Containers Containers
	Policy     GCPolicy
	Log        *slog.Logger
	Now        func() time.Time
	// Statfs gives the capacity and available bytes of a mount point; nil uses statfs(2).
	Statfs func(path string) (capacity, available uint64, err error)
	// Keep names images never removed (the runtime's sandbox image, --pod-infra-container-image):
	// CRI lists no sandbox's image, so it would look unused, and runtimes before CRI's Pinned field
	// (containerd 1.6) do not pin it.
	Keep []string

	mu      sync.Mutex
	records map[string]*imageRecord
	// collectMu makes collections one at a time: the periodic one and the eviction manager's.
	collectMu sync.Mutex
}

type imageRecord struct {
	firstDetected, lastUsed time.Time
	size                    uint64
	pinned                  bool
}

func (g *ImageGC) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

// MarkUsed records an image as used now (the image manager calls it when a container asks for it).
func (g *ImageGC) MarkUsed(id string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.records == nil {
		g.records = map[string]*imageRecord{}
	}
	r := g.records[id]
	if r == nil {
		r = &imageRecord{firstDetected: g.now()}
		g.records[id] = r
	}
	r.lastUsed = g.now()
}

// Detect refreshes the records from the runtime: new images, images in use, images gone.
func (g *ImageGC) Detect(ctx context.Context) error {
	return g.detect(ctx, g.now())
}

// detect marks the images in use at now; GarbageCollect passes its own now, so "used in this very
// detection" is an exact comparison.
func (g *ImageGC) detect(ctx context.Context, now time.Time) error {
	imgs, err := g.Images.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return fmt.Errorf("list images: %w", err)
	}
	cs, err := g.Containers.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return fmt.Errorf("list containers: %w", err)
	}
	inUse := map[string]bool{}
	for _, c := range cs.Containers {
		inUse[c.ImageRef] = true
		if c.Image != nil {
			inUse[c.Image.Image] = true
		}
		inUse[c.ImageId] = true
		// Only a container's status shows its mounts, as the kubelet reads them.
		st, err := g.Containers.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.Id})
		if status.Code(err) == codes.NotFound {
			continue
		}
		if err != nil {
			return fmt.Errorf("status of container %s: %w", c.Id, err)
		}
		for _, mnt := range st.GetStatus().GetMounts() {
			if img := mnt.GetImage().GetImage(); img != "" {
				inUse[img] = true
			}
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.records == nil {
		g.records = map[string]*imageRecord{}
	}
	seen := map[string]bool{}
	for _, img := range imgs.Images {
		seen[img.Id] = true
		r := g.records[img.Id]
		if r == nil {
			r = &imageRecord{firstDetected: now}
			g.records[img.Id] = r
		}
		r.size, r.pinned = img.Size, img.Pinned || g.kept(img)
		used := inUse[img.Id]
		for _, n := range append(append([]string{}, img.RepoTags...), img.RepoDigests...) {
			used = used || inUse[n]
		}
		if used {
			r.lastUsed = now
		}
	}
	for id := range g.records {
		if !seen[id] {
			delete(g.records, id)
		}
	}
	return nil
}

func (g *ImageGC) kept(img *runtimeapi.Image) bool {
	for _, k := range g.Keep {
		if k == img.Id || slices.Contains(img.RepoTags, k) || slices.Contains(img.RepoDigests, k) {
			return true
		}
	}
	return false
}

// Usage is the image filesystem's capacity and free space.
func (g *ImageGC) Usage(ctx context.Context) (capacity, available uint64, mountpoint string, err error) {
	fs, err := g.Images.ImageFsInfo(ctx, &runtimeapi.ImageFsInfoRequest{})
	if err != nil {
		return 0, 0, "", fmt.Errorf("image fs info: %w", err)
	}
	if len(fs.ImageFilesystems) == 0 || fs.ImageFilesystems[0].FsId == nil || fs.ImageFilesystems[0].FsId.Mountpoint == "" {
		return 0, 0, "", errors.New("image fs info: the runtime names no image filesystem")
	}
	mountpoint = fs.ImageFilesystems[0].FsId.Mountpoint
	statfs := g.Statfs
	if statfs == nil {
		statfs = statfsBytes
	}
	capacity, available, err = statfs(mountpoint)
	return capacity, available, mountpoint, err
}

func statfsBytes(path string) (uint64, uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return st.Blocks * uint64(st.Bsize), st.Bavail * uint64(st.Bsize), nil
}

// GCResult is what one GarbageCollect did.
type GCResult struct {
	UsagePercent int
	Removed      []string
	Freed        uint64
}

// GarbageCollect removes unused images when usage is at or above the high mark, until the low mark
// would be reached. It returns ErrNotEnoughFreed when the images it may remove are not enough.
func (g *ImageGC) GarbageCollect(ctx context.Context) (GCResult, error) {
	g.collectMu.Lock()
	defer g.collectMu.Unlock()
	return g.collect(ctx, g.Policy)
}

// DeleteUnusedImages is the eviction manager's reclaim of disk: every unused image old enough
// goes, whatever the thresholds say. Not freeing enough is no failure here: it asked for
// everything, and what could go went.
func (g *ImageGC) DeleteUnusedImages(ctx context.Context) error {
	g.collectMu.Lock()
	defer g.collectMu.Unlock()
	res, err := g.collect(ctx, GCPolicy{MinAge: g.Policy.MinAge})
	if len(res.Removed) > 0 {
		g.logger().Info("eviction: removed unused images", "removed", len(res.Removed), "freedBytes", res.Freed)
	}
	if errors.Is(err, ErrNotEnoughFreed) {
		return nil
	}
	return err
}

func (g *ImageGC) logger() *slog.Logger {
	if g.Log == nil {
		return slog.Default()
	}
	return g.Log
}

func (g *ImageGC) collect(ctx context.Context, policy GCPolicy) (GCResult, error) {
	var res GCResult
	if policy.HighThresholdPercent >= 100 {
		return res, nil
	}
	capacity, available, mp, err := g.Usage(ctx)
	if err != nil {
		return res, err
	}
	if capacity == 0 {
		return res, fmt.Errorf("image filesystem %s reports no capacity", mp)
	}
	res.UsagePercent = int(100 - available*100/capacity)
	if res.UsagePercent < policy.HighThresholdPercent {
		return res, nil
	}
	want := int64(capacity*uint64(100-policy.LowThresholdPercent)/100) - int64(available)
	now := g.now()
	if err := g.detect(ctx, now); err != nil {
		return res, err
	}
	type cand struct {
		id string
		r  imageRecord
	}
	var cands []cand
	g.mu.Lock()
	for id, r := range g.records {
		// Used by a container in this very detection, too young, or pinned (the sandbox image): kept.
		if r.lastUsed.Equal(now) || now.Sub(r.firstDetected) < policy.MinAge || r.pinned {
			continue
		}
		cands = append(cands, cand{id, *r})
	}
	g.mu.Unlock()
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i].r, cands[j].r
		if !a.lastUsed.Equal(b.lastUsed) {
			return a.lastUsed.Before(b.lastUsed)
		}
		return a.firstDetected.Before(b.firstDetected)
	})
	log := g.logger()
	var errs []error
	for _, c := range cands {
		if int64(res.Freed) >= want {
			break
		}
		if _, err := g.Images.RemoveImage(ctx, &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: c.id}}); err != nil {
			errs = append(errs, fmt.Errorf("remove image %s: %w", c.id, err))
			continue
		}
		log.Info("image gc removed an image", "image", c.id, "size", c.r.size, "lastUsed", c.r.lastUsed)
		g.mu.Lock()
		delete(g.records, c.id)
		g.mu.Unlock()
		res.Removed = append(res.Removed, c.id)
		res.Freed += c.r.size
	}
	if int64(res.Freed) < want {
		errs = append(errs, fmt.Errorf("%w: wanted %d bytes, freed %d", ErrNotEnoughFreed, want, res.Freed))
	}
	return res, errors.Join(errs...)
}
