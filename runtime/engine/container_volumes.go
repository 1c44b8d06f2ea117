package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	securejoin "github.com/cyphar/filepath-securejoin"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// imageVolumeID names the rootfs the image store makes for one image volume of a container: a
// hex ID, as the store wants, that the container's ID and the volume's path determine, so that
// removal finds it again after a restart.
func imageVolumeID(containerID, containerPath string) string {
	sum := sha256.Sum256([]byte(containerID + "\x00" + filepath.Clean(containerPath)))
	return hex.EncodeToString(sum[:])
}

// prepareImageVolumes makes the image volumes a request mounts (Mount.Image: an OCI image's
// contents at a path, read-only) and returns the request's mounts with those turned into plain
// read-only binds, and the volume IDs to remove with the container. On error nothing is left.
func (s *Engine) prepareImageVolumes(ctx context.Context, containerID string, mounts []*runtimeapi.Mount) (_ []*runtimeapi.Mount, vols []string, retErr error) {
	defer func() {
		if retErr != nil {
			s.removeImageVolumes(context.WithoutCancel(ctx), vols)
			vols = nil
		}
	}()
	out := make([]*runtimeapi.Mount, 0, len(mounts))
	for _, m := range mounts {
		if m.GetImage().GetImage() == "" {
			out = append(out, m)
			continue
		}
		volID := imageVolumeID(containerID, m.GetContainerPath())
		r, err := s.cfg.Images.PrepareRootfs(ctx, volID, m.GetImage().GetImage())
		if err != nil {
			return nil, vols, fmt.Errorf("image volume %q from %q: %w", m.GetContainerPath(), m.GetImage().GetImage(), err)
		}
		vols = append(vols, volID)
		src := r.Path
		if sub := m.GetImageSubPath(); sub != "" {
			// The image is untrusted: its symlinks must not lead the bind out of it.
			if src, err = securejoin.SecureJoin(r.Path, sub); err != nil {
				return nil, vols, err
			}
			if _, err := os.Stat(src); err != nil {
				return nil, vols, fmt.Errorf("image volume %q: sub path %q: %v: %w", m.GetContainerPath(), sub, err, errdefs.ErrInvalidArgument)
			}
		}
		bind := proto.Clone(m).(*runtimeapi.Mount)
		bind.Image, bind.ImageSubPath = nil, ""
		bind.HostPath, bind.Readonly = src, true
		bind.Propagation = runtimeapi.MountPropagation_PROPAGATION_PRIVATE
		out = append(out, bind)
	}
	return out, vols, nil
}

func (s *Engine) removeImageVolumes(ctx context.Context, vols []string) error {
	var first error
	for _, v := range vols {
		if err := s.cfg.Images.RemoveRootfs(ctx, v); err != nil && first == nil {
			first = err
		}
	}
	return first
}
