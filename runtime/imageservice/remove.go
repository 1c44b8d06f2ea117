package imageservice

import (
	"context"
	"errors"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// RemoveImage removes an image and all its names. Removing a missing image succeeds, as CRI asks;
// an image a container still uses is refused with FailedPrecondition.
func (s *Service) RemoveImage(ctx context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	ref := req.GetImage().GetImage()
	if ref == "" {
		return nil, fmt.Errorf("remove image: image reference is empty: %w", errdefs.ErrInvalidArgument)
	}
	if err := s.images.Remove(ctx, ref); err != nil && !errors.Is(err, errdefs.ErrNotFound) {
		return nil, fmt.Errorf("remove image %q: %w", ref, err)
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}
