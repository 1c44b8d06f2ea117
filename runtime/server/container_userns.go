package server

import (
	"fmt"
	"os"
	"path/filepath"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// A container of a pod with its own user namespace runs as ids mapped to unprivileged host ids,
// while its image's files belong to host root: through the plain overlay it could not write
// its own /etc, nor could the runtime make mount points in it. So its overlay is remounted on
// idmapped mounts of its layers (mount_setattr MOUNT_ATTR_IDMAP with the pod's user namespace):
// a file of host uid 0 is its uid 0. The rootfs path's parents must be searchable by others
// (the store makes its dirs 0711) and the container's own rootfs dir by the namespace's root
// group (the store makes it 0710 for that group), as the OCI runtime resolves it as the mapped root.

// idmapper is what an image store offers for such containers (imagestore.Store does).
type idmapper interface {
	// RootfsDir holds the containers' rootfs mounts.
	RootfsDir() string
	RemountIdmapped(containerID, usernsPath string, rootUID, rootGID int) error
}

func (s *Server) idmapRootfs(containerID, usernsPath string, u *runtimeapi.UserNamespace) error {
	im, ok := s.cfg.Images.(idmapper)
	if !ok {
		return fmt.Errorf("the image store cannot idmap a rootfs for a user namespace: %w", errdefs.ErrFailedPrecondition)
	}
	return im.RemountIdmapped(containerID, usernsPath, int(u.GetUids()[0].GetHostId()), int(u.GetGids()[0].GetHostId()))
}

// usernsRootfsReachable reports whether a mapped root can reach the image store's rootfs dirs by
// path: the store idmaps rootfs and every dir from / down to its rootfs dir is searchable by
// others. A runtime root under a private dir (mktemp -d makes 0700) fails this, and then pods
// with their own user namespace are refused and not advertised.
func (s *Server) usernsRootfsReachable() bool {
	im, ok := s.cfg.Images.(idmapper)
	if !ok {
		return false
	}
	return searchable(im.RootfsDir())
}

func searchable(p string) bool {
	for {
		st, err := os.Stat(p)
		if err != nil || st.Mode().Perm()&0o001 == 0 {
			return false
		}
		parent := filepath.Dir(p)
		if parent == p {
			return true
		}
		p = parent
	}
}
