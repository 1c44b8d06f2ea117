package imageservice

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/imagestore"
)

// PullImage pulls an image with the credentials the kubelet passes, and answers with the image ID.
func (s *Service) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	ref := req.GetImage().GetImage()
	if ref == "" {
		return nil, fmt.Errorf("pull: image reference is empty: %w", errdefs.ErrInvalidArgument)
	}
	var auth *imagestore.Auth
	if a := req.GetAuth(); a != nil {
		auth = &imagestore.Auth{Username: a.Username, Password: a.Password, Auth: a.Auth,
			IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken}
	}
	img, err := s.images.Pull(ctx, ref, imagestore.PullOptions{Auth: auth})
	if err != nil {
		return nil, fmt.Errorf("pull image %q: %w", ref, err)
	}
	s.log.Info("image pulled", "image", ref, "id", img.ID, "size", img.Size)
	return &runtimeapi.PullImageResponse{ImageRef: img.ID}, nil
}
