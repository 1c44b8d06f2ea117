package runtimetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/runtime/imagestore"
	"github.com/nodelet/nodelet/runtime/store"
)

// OverlayProvider is a RootfsProvider over one read-only folder: every container gets an overlay
// with its own upper dir, as the image store gives it over image layers.
type OverlayProvider struct {
	lower, dir string
	mu         sync.Mutex
}

// NewOverlayProvider serves lower (a rootfs folder) as every image, with overlays under dir.
func NewOverlayProvider(lower, dir string) *OverlayProvider {
	_ = os.MkdirAll(dir, 0o755)
	return &OverlayProvider{lower: lower, dir: dir}
}

// ImageID is the fake image ID every rootfs reports.
var ImageID = func() string {
	sum := sha256.Sum256([]byte("nodelet servertest busybox"))
	return "sha256:" + hex.EncodeToString(sum[:])
}()

func (p *OverlayProvider) PrepareRootfs(ctx context.Context, containerID, image string) (*imagestore.Rootfs, error) {
	if err := store.ValidID(containerID); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	base := filepath.Join(p.dir, containerID)
	merged := filepath.Join(base, "merged")
	rfs := &imagestore.Rootfs{Path: merged, ImageID: ImageID, ImageRef: Image + "@" + ImageID}
	rfs.Config.Env = []string{"PATH=/bin"}
	rfs.Config.Cmd = []string{"/bin/sh"}
	if mounted(merged) {
		return rfs, nil
	}
	for _, d := range []string{"upper", "work", "merged"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			return nil, err
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", p.lower, filepath.Join(base, "upper"), filepath.Join(base, "work"))
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		os.RemoveAll(base)
		return nil, fmt.Errorf("overlay for %s: %w", containerID, err)
	}
	return rfs, nil
}

func (p *OverlayProvider) RemoveRootfs(ctx context.Context, containerID string) error {
	if err := store.ValidID(containerID); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	base := filepath.Join(p.dir, containerID)
	merged := filepath.Join(base, "merged")
	if err := unix.Unmount(merged, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount rootfs of %s: %w", containerID, err)
	}
	if err := imagestore.UnmountIdmapDir(filepath.Join(base, "idmap")); err != nil {
		return err
	}
	return os.RemoveAll(base)
}

// ListRootfs lists the container IDs that have an overlay dir.
func (p *OverlayProvider) ListRootfs(ctx context.Context) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ents, err := os.ReadDir(p.dir)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if e.IsDir() && store.ValidID(e.Name()) == nil {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// RootfsDir is where the overlays live (the engine checks a mapped root can reach them).
func (p *OverlayProvider) RootfsDir() string { return p.dir }

// RemountIdmapped remounts a container's overlay on an idmapped mount of the lower folder, as
// imagestore.Store does for pods with their own user namespace.
func (p *OverlayProvider) RemountIdmapped(containerID, usernsPath string, rootUID, rootGID int) error {
	if err := store.ValidID(containerID); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	base := filepath.Join(p.dir, containerID)
	userns, err := os.Open(usernsPath)
	if err != nil {
		return err
	}
	defer userns.Close()
	idmap := filepath.Join(base, "idmap")
	if err := os.MkdirAll(idmap, 0o700); err != nil {
		return err
	}
	defer imagestore.UnmountIdmapDir(idmap)
	lower := filepath.Join(idmap, "0")
	if err := imagestore.AttachIdmapped(p.lower, lower, userns); err != nil {
		return err
	}
	if err := os.Chown(filepath.Join(base, "upper"), rootUID, rootGID); err != nil {
		return err
	}
	merged := filepath.Join(base, "merged")
	if err := unix.Unmount(merged, 0); err != nil {
		return err
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", lower, filepath.Join(base, "upper"), filepath.Join(base, "work"))
	return unix.Mount("overlay", merged, "overlay", 0, opts)
}

// mounted reports whether path is a mount point (its device differs from its parent's, or a
// bind of the same fs, which overlay never is).
func mounted(path string) bool {
	var st, pst unix.Stat_t
	if unix.Lstat(path, &st) != nil || unix.Lstat(filepath.Dir(path), &pst) != nil {
		return false
	}
	return st.Dev != pst.Dev
}
