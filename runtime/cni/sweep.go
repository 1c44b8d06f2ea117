package cni

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// SweepOrphans tears down the network of every sandbox that libcni's cache or a pending mark
// knows and owned does not: an ADD whose sandbox record is gone keeps its IP, its veth and its
// port rules until then. The runtime calls it once at start, before it serves.
func (m *Manager) SweepOrphans(ctx context.Context, owned func(sandboxID string) bool) error {
	atts, err := m.cni.GetCachedAttachments("")
	if err != nil {
		return fmt.Errorf("read CNI cache: %w", err)
	}
	orphans := map[string]bool{}
	for _, a := range atts {
		if !owned(a.ContainerID) {
			orphans[a.ContainerID] = true
		}
	}
	dir := filepath.Join(m.opts.StateDir, "pending")
	ents, _ := os.ReadDir(dir)
	var errs []error
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			// A crash between writing a mark and renaming it into place: the ADD it was to guard
			// never started, so there is nothing to release, and no writer runs before the sweep.
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		if id, ok := strings.CutSuffix(e.Name(), ".json"); ok && !owned(id) {
			orphans[id] = true
		}
	}
	for _, id := range slices.Sorted(maps.Keys(orphans)) {
		m.log.Warn("releasing the network of a sandbox that no longer exists", "sandbox", id)
		errs = append(errs, m.TearDownPod(ctx, PodNetwork{SandboxID: id}))
	}
	return errors.Join(errs...)
}
