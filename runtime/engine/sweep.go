package engine

// The orphan sweep runs once at start, after recovery, before the daemon serves. Records are the
// only owners: whatever a create or remove cut short by a crash left with no record naming it
// (a rootfs still mounted and keeping its image in use, a bundle, a monitor or a half-created
// runtime container, an exit file, a pod's dirs, shm mount, cgroups or network) is removed, as
// nobody could ever ask for it again. An unreadable record still owns its ID: the sweep removes
// only what it is sure no one wants.

import (
	"context"
	"errors"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"time"

	"github.com/nodelet/nodelet/internal/cgroupfs"
	"github.com/nodelet/nodelet/runtime/store"
)

// sweepStepTimeout bounds each runtime call of the sweep, so one wedged runtime cannot keep the
// daemon from serving.
const sweepStepTimeout = 30 * time.Second

// OrphanSweeper is a NetworkPlugin that can release the networks of sandboxes it set up and
// that no longer exist (an ADD whose sandbox record a crash lost).
type OrphanSweeper interface {
	SweepOrphans(ctx context.Context, owned func(sandboxID string) bool) error
}

func (s *Engine) sweepOrphans(ctx context.Context) {
	if err := s.sweepContainers(ctx); err != nil {
		s.log.Error("sweep of orphaned containers", "err", err)
	}
	if err := s.sweepSandboxes(ctx); err != nil {
		s.log.Error("sweep of orphaned sandboxes", "err", err)
	}
	if err := s.sweepIdmappedMounts(); err != nil {
		s.log.Error("sweep of idmapped mounts", "err", err)
	}
}

// sweepContainers removes what container IDs no record owns left behind.
func (s *Engine) sweepContainers(ctx context.Context) error {
	owned, err := s.containerDB.IDs()
	if err != nil {
		return err
	}
	for _, c := range s.containers.List() {
		for _, v := range c.ImageVolumes {
			owned[v] = true
		}
	}
	orphans := map[string]bool{}
	add := func(ids []string) {
		for _, id := range ids {
			if !owned[id] && store.ValidID(id) == nil {
				orphans[id] = true
			}
		}
	}
	add(dirNames(filepath.Join(s.cfg.Root, "containers"), true))
	add(dirNames(s.ctr.exitDir, false))
	for name := range s.cfg.Handlers {
		rt, err := s.ctr.runtimeFor(name)
		if err == nil && !rt.Sandboxed() {
			add(dirNames(rt.Root, true))
		}
	}
	if l, ok := s.cfg.Images.(RootfsLister); ok {
		ids, err := l.ListRootfs(ctx)
		if err != nil {
			return err
		}
		add(ids)
	}
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(orphans)) {
		s.log.Warn("removing what a container create cut short left behind", "id", id)
		errs = append(errs, s.removeOrphanContainer(ctx, id))
	}
	return errors.Join(errs...)
}

// removeOrphanContainer undoes, in the order a failed create does, everything a container ID
// may have: its monitor and a runtime call hung under it, the runtime's container, its exit file,
// rootfs, cgroup and bundle.
func (s *Engine) removeOrphanContainer(ctx context.Context, id string) error {
	bundle := filepath.Join(s.cfg.Root, "containers", id)
	killProcessesMentioning(bundle)
	var errs []error
	for name := range s.cfg.Handlers {
		rt, err := s.ctr.runtimeFor(name)
		if err != nil {
			continue
		}
		dctx, cancel := context.WithTimeout(ctx, sweepStepTimeout)
		errs = append(errs, rt.Delete(dctx, id))
		cancel()
	}
	if err := os.Remove(filepath.Join(s.ctr.exitDir, id)); err != nil && !os.IsNotExist(err) {
		errs = append(errs, err)
	}
	if s.cfg.Images != nil {
		errs = append(errs, s.cfg.Images.RemoveRootfs(ctx, id))
	}
	errs = append(errs, s.removeOrphanContainerCgroups(id))
	errs = append(errs, os.RemoveAll(bundle))
	return errors.Join(errs...)
}

// removeOrphanContainerCgroups removes the container's cgroup below any known pod cgroup; the
// runtime's delete does it when it got as far as recording the container.
func (s *Engine) removeOrphanContainerCgroups(id string) error {
	roots, err := cgroupRoots()
	if err != nil {
		return err
	}
	parents := []string{s.sb.daemonCgroupParent()}
	for _, sb := range s.sandboxes.List() {
		parents = append(parents, sb.CgroupParent)
	}
	var errs []error
	for _, p := range parents {
		for _, r := range roots {
			if err := os.Remove(filepath.Join(r.Path, p, containerCgroupPrefix+id)); err != nil && !os.IsNotExist(err) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// sweepSandboxes removes what sandbox IDs no record owns left behind. Pins were swept with the
// records (removeOrphanPins).
func (s *Engine) sweepSandboxes(ctx context.Context) error {
	owned, err := s.sandboxDB.IDs()
	if err != nil {
		return err
	}
	orphans := map[string]bool{}
	for _, dir := range []string{filepath.Join(s.cfg.Root, "pods"), filepath.Join(s.cfg.State, "pods")} {
		for _, id := range dirNames(dir, true) {
			if !owned[id] && store.ValidID(id) == nil {
				orphans[id] = true
			}
		}
	}
	// Only IDs found in this daemon's own dirs: the cgroup parent may be shared with another
	// daemon, whose pods must not be taken for orphans. Remove deletes the pod's dir after its
	// cgroups, so a pod whose dir is gone has no cgroups left.
	roots, err := cgroupRoots()
	if err != nil {
		return err
	}
	parent := s.sb.daemonCgroupParent()
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(orphans)) {
		s.log.Warn("removing what a sandbox cut short left behind", "id", id)
		errs = append(errs, s.deleteOrphanGvisorSandbox(ctx, id))
		errs = append(errs, unmount(filepath.Join(s.sb.stateDir(id), "shm")))
		errs = append(errs, os.RemoveAll(s.sb.stateDir(id)))
		errs = append(errs, removeCgroupTree(roots, path.Join(parent, id)))
		// Last, as Remove does: while the dir is there, a restart finds the rest again.
		errs = append(errs, os.RemoveAll(s.sb.dir(id)))
	}
	if sw, ok := s.cfg.Network.(OrphanSweeper); ok {
		errs = append(errs, sw.SweepOrphans(ctx, func(id string) bool { return owned[id] }))
	}
	return errors.Join(errs...)
}

// daemonCgroupParent is where pods go that name no cgroup parent; it stays when they go.
func (m *sandboxManager) daemonCgroupParent() string {
	if m.cgroupParent != "" {
		return m.cgroupParent
	}
	return defaultCgroupParent
}

// removeCgroupTree kills what runs in the orphaned pod cgroup rel (its init, containers no
// record knows) and removes it and the cgroups below it, children first, in every hierarchy.
func removeCgroupTree(roots []cgroupfs.Hierarchy, rel string) error {
	for _, r := range roots {
		killCgroupTree(filepath.Join(r.Path, rel))
	}
	var errs []error
	for _, r := range roots {
		errs = append(errs, rmdirTree(filepath.Join(r.Path, rel)))
	}
	return errors.Join(errs...)
}

func rmdirTree(dir string) error {
	for _, child := range dirNames(dir, true) {
		if err := rmdirTree(filepath.Join(dir, child)); err != nil {
			return err
		}
	}
	if err := rmdirCgroup(dir); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// dirNames lists the entries of dir (only subdirectories when dirsOnly); a missing dir has none.
func dirNames(dir string, dirsOnly bool) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if !dirsOnly || e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}
