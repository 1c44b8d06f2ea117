package runtimetest

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Image is the one image the fake ImageService knows; every rootfs is the busybox folder.
const Image = "docker.io/library/busybox:latest"

// fakeImages is an ImageService that reports Image as present and pulled, so CRI clients that
// check images first (crictl, critest) work before the real image service is plugged in.
type fakeImages struct {
	runtimeapi.UnimplementedImageServiceServer
}

func (f *fakeImages) image() *runtimeapi.Image {
	return &runtimeapi.Image{Id: ImageID, RepoTags: []string{Image}, RepoDigests: []string{Image + "@" + ImageID}, Size: 1 << 20}
}

func (f *fakeImages) ListImages(ctx context.Context, req *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	return &runtimeapi.ListImagesResponse{Images: []*runtimeapi.Image{f.image()}}, nil
}

func (f *fakeImages) ImageStatus(ctx context.Context, req *runtimeapi.ImageStatusRequest) (*runtimeapi.ImageStatusResponse, error) {
	switch req.GetImage().GetImage() {
	case Image, "busybox", "busybox:latest", ImageID:
		return &runtimeapi.ImageStatusResponse{Image: f.image()}, nil
	}
	return &runtimeapi.ImageStatusResponse{}, nil
}

func (f *fakeImages) PullImage(ctx context.Context, req *runtimeapi.PullImageRequest) (*runtimeapi.PullImageResponse, error) {
	return &runtimeapi.PullImageResponse{ImageRef: ImageID}, nil
}

func (f *fakeImages) RemoveImage(ctx context.Context, req *runtimeapi.RemoveImageRequest) (*runtimeapi.RemoveImageResponse, error) {
	return &runtimeapi.RemoveImageResponse{}, nil
}

func (f *fakeImages) ImageFsInfo(ctx context.Context, req *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	return &runtimeapi.ImageFsInfoResponse{}, nil
}
