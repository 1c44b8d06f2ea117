package imageservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/imagestore"
)

// ListImages lists every image, or those the filter's reference names.
func (s *Service) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	if ref := req.GetFilter().GetImage().GetImage(); ref != "" {
		img, err := s.images.Get(ref)
		if errors.Is(err, errdefs.ErrNotFound) {
			return &runtimeapi.ListImagesResponse{}, nil
		}
		if err != nil {
			return nil, err
		}
		return &runtimeapi.ListImagesResponse{Images: []*runtimeapi.Image{s.toCRI(img)}}, nil
	}
	imgs, err := s.images.List()
	if err != nil {
		return nil, err
	}
	out := make([]*runtimeapi.Image, 0, len(imgs))
	for _, img := range imgs {
		out = append(out, s.toCRI(img))
	}
	return &runtimeapi.ListImagesResponse{Images: out}, nil
}

// verboseInfo is the "info" entry of a verbose ImageStatus, shaped as containerd's so tools that
// read `crictl inspecti` output find imageSpec where they expect it.
type verboseInfo struct {
	ChainID        string                `json:"chainID"`
	ManifestDigest string                `json:"manifestDigest"`
	Layers         []imagestore.LayerRef `json:"layers"`
	ImageSpec      *ocispec.Image        `json:"imageSpec"`
}

// ImageStatus describes one image; a missing image is an empty answer, not an error, as CRI says.
func (s *Service) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	ref := req.GetImage().GetImage()
	if ref == "" {
		return nil, fmt.Errorf("image status: image reference is empty: %w", errdefs.ErrInvalidArgument)
	}
	img, err := s.images.Get(ref)
	if errors.Is(err, errdefs.ErrNotFound) {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	if err != nil {
		return nil, err
	}
	resp := &runtimeapi.ImageStatusResponse{Image: s.toCRI(img)}
	if req.GetVerbose() {
		cfg, _, err := s.images.Config(img)
		if err != nil {
			return nil, err
		}
		info := verboseInfo{ManifestDigest: img.ManifestDigest, Layers: slices.Clone(img.Layers), ImageSpec: cfg}
		if n := len(img.Layers); n > 0 {
			info.ChainID = img.Layers[n-1].ChainID
		}
		b, err := json.Marshal(info)
		if err != nil {
			return nil, err
		}
		resp.Info = map[string]string{"info": string(b)}
	}
	return resp, nil
}
