package images

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeImages is an ImageService whose images are files in dir (when set), so their sizes take
// real space on a real filesystem.
type fakeImages struct {
	mu         sync.Mutex
	dir        string
	mountpoint string                       // reported by ImageFsInfo instead of dir when set
	images     map[string]*runtimeapi.Image // by ID
	pulls      []string                     // "image auth-user"
	failPull   map[string]error
	needUser   string
	gate       chan struct{} // when set, pulls wait for it to close
	inFlight   int
	maxSeen    int
	removed    []string
}

func newFakeImages(dir string) *fakeImages {
	return &fakeImages{dir: dir, images: map[string]*runtimeapi.Image{}, failPull: map[string]error{}}
}

func (f *fakeImages) add(id, tag string, size int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.images[id] = &runtimeapi.Image{Id: id, RepoTags: []string{tag}, Size: uint64(size)}
	if f.dir != "" {
		if err := os.WriteFile(filepath.Join(f.dir, id), make([]byte, size), 0o644); err != nil {
			panic(err)
		}
	}
}

func (f *fakeImages) find(name string) *runtimeapi.Image {
	for _, img := range f.images {
		if img.Id == name {
			return img
		}
		for _, t := range img.RepoTags {
			if t == name {
				return img
			}
		}
	}
	return nil
}

func (f *fakeImages) ImageStatus(_ context.Context, in *runtimeapi.ImageStatusRequest, _ ...grpc.CallOption) (*runtimeapi.ImageStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &runtimeapi.ImageStatusResponse{Image: f.find(in.Image.Image)}, nil
}

func (f *fakeImages) PullImage(ctx context.Context, in *runtimeapi.PullImageRequest, _ ...grpc.CallOption) (*runtimeapi.PullImageResponse, error) {
	f.mu.Lock()
	user := ""
	if in.Auth != nil {
		user = in.Auth.Username
	}
	f.pulls = append(f.pulls, in.Image.Image+" "+user)
	f.inFlight++
	f.maxSeen = max(f.maxSeen, f.inFlight)
	gate := f.gate
	f.mu.Unlock()
	defer func() { f.mu.Lock(); f.inFlight--; f.mu.Unlock() }()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.failPull[in.Image.Image]; err != nil {
		return nil, err
	}
	if f.needUser != "" && user != f.needUser {
		return nil, status.Error(codes.Unauthenticated, "no")
	}
	img := f.find(in.Image.Image)
	if img == nil {
		id := fmt.Sprintf("sha256:%d", len(f.images)+1)
		img = &runtimeapi.Image{Id: id, RepoTags: []string{in.Image.Image}, Size: 4096}
		f.images[id] = img
	}
	return &runtimeapi.PullImageResponse{ImageRef: img.Id}, nil
}

func (f *fakeImages) ListImages(context.Context, *runtimeapi.ListImagesRequest, ...grpc.CallOption) (*runtimeapi.ListImagesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := &runtimeapi.ListImagesResponse{}
	for _, img := range f.images {
		r.Images = append(r.Images, img)
	}
	return r, nil
}

func (f *fakeImages) RemoveImage(_ context.Context, in *runtimeapi.RemoveImageRequest, _ ...grpc.CallOption) (*runtimeapi.RemoveImageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	img := f.find(in.Image.Image)
	if img == nil {
		return &runtimeapi.RemoveImageResponse{}, nil
	}
	delete(f.images, img.Id)
	f.removed = append(f.removed, img.Id)
	if f.dir != "" {
		os.Remove(filepath.Join(f.dir, img.Id))
	}
	return &runtimeapi.RemoveImageResponse{}, nil
}

func (f *fakeImages) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest, ...grpc.CallOption) (*runtimeapi.ImageFsInfoResponse, error) {
	mp := f.dir
	if f.mountpoint != "" {
		mp = f.mountpoint
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: mp}}}}, nil
}

// fakeContainers holds one exited container per image, and one more per image volume, which
// mounts that image.
type fakeContainers struct{ images, volumes []string }

func (f fakeContainers) ContainerStatus(_ context.Context, in *runtimeapi.ContainerStatusRequest, _ ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error) {
	st := &runtimeapi.ContainerStatus{Id: in.ContainerId}
	var i int
	if _, err := fmt.Sscanf(in.ContainerId, "vol%d", &i); err == nil && i < len(f.volumes) {
		st.Mounts = []*runtimeapi.Mount{{ContainerPath: "/vol", Image: &runtimeapi.ImageSpec{Image: f.volumes[i]}, Readonly: true}}
	}
	return &runtimeapi.ContainerStatusResponse{Status: st}, nil
}

func (f fakeContainers) ListContainers(context.Context, *runtimeapi.ListContainersRequest, ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	r := &runtimeapi.ListContainersResponse{}
	for i, img := range f.images {
		r.Containers = append(r.Containers, &runtimeapi.Container{Id: fmt.Sprint(i), Image: &runtimeapi.ImageSpec{Image: img}, ImageRef: img,
			State: runtimeapi.ContainerState_CONTAINER_EXITED})
	}
	for i := range f.volumes {
		r.Containers = append(r.Containers, &runtimeapi.Container{Id: fmt.Sprintf("vol%d", i), Image: &runtimeapi.ImageSpec{Image: "reg/app:1"},
			ImageRef: "reg/app:1", State: runtimeapi.ContainerState_CONTAINER_RUNNING})
	}
	return r, nil
}
