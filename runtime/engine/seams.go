package engine

import (
	"context"

	"github.com/nodelet/nodelet/runtime/cni"
	"github.com/nodelet/nodelet/runtime/imagestore"
)

// RootfsProvider gives containers their root filesystems. The image store implements it; tests
// may use a provider over a plain directory.
type RootfsProvider interface {
	// PrepareRootfs makes a writable rootfs for containerID from image (a name, name@digest or
	// image ID, as in CRI's ImageSpec.Image). Calling it again for the same containerID returns
	// the same rootfs.
	PrepareRootfs(ctx context.Context, containerID, image string) (*imagestore.Rootfs, error)
	// RemoveRootfs unmounts and deletes a container's rootfs. A missing one is not an error.
	RemoveRootfs(ctx context.Context, containerID string) error
}

// RootfsLister is a RootfsProvider that can list what it holds, so that a restarted daemon
// removes the rootfs of creates cut short (each one keeps its image in use).
type RootfsLister interface {
	// ListRootfs lists the container IDs (and image volume IDs) that have a rootfs.
	ListRootfs(ctx context.Context) ([]string, error)
}

// NetworkPlugin gives pods their network. The CNI manager implements it; nil means pods get
// loopback only.
type NetworkPlugin interface {
	SetUpPod(ctx context.Context, pod cni.PodNetwork) (*cni.Result, error)
	// TearDownPod releases what SetUpPod took. It is idempotent and works after a daemon restart.
	TearDownPod(ctx context.Context, pod cni.PodNetwork) error
	// Status is nil when pods can be networked, else the reason they cannot.
	Status() error
}

// PodCIDRSetter is a NetworkPlugin that can hand out the node's pod CIDR (UpdateRuntimeConfig).
type PodCIDRSetter interface {
	SetPodCIDR(cidrs string) (changed bool, err error)
}
