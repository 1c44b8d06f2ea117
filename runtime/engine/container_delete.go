package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/oci"
	"github.com/nodelet/nodelet/runtime/store"
)

// deleteFromRuntime forgets an exited container in its OCI runtime. For runc and crun, which keep
// nothing for an exited container but its cgroup dirs and a state dir under --root, it removes
// those itself: `runc delete` costs a Go start-up and a state load, about half of a Remove. Any
// doubt — a cgroup still busy (processes outlived the init, as in a pod-shared PID namespace), an
// unexpected error, gVisor, a container not known to have exited — leaves the work to the
// runtime's own `delete --force`, which also kills what is left.
func deleteFromRuntime(ctx context.Context, rt *oci.Runtime, c *store.Container) error {
	if !rt.Sandboxed() && c.Snapshot().State == runtimeapi.ContainerState_CONTAINER_EXITED && removeExitedState(rt, c) {
		return nil
	}
	return rt.Delete(ctx, c.ID)
}

// removeExitedState rmdirs the container's cgroup in every hierarchy (an empty cgroup only: the
// kernel refuses a busy one), then the runtime's state dir; false when it could not.
func removeExitedState(rt *oci.Runtime, c *store.Container) bool {
	if c.CgroupPath == "" || store.ValidID(c.ID) != nil {
		return false
	}
	roots, err := cgroupRoots()
	if err != nil {
		return false
	}
	for _, r := range roots {
		if err := os.Remove(filepath.Join(r.Path, c.CgroupPath)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return false
		}
	}
	return os.RemoveAll(filepath.Join(rt.Root, c.ID)) == nil
}
