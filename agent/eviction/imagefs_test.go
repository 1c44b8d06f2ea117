package eviction

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type imageFsInfoer struct {
	calls int
	err   error
}

func (f *imageFsInfoer) ImageFsInfo(context.Context, *runtimeapi.ImageFsInfoRequest, ...grpc.CallOption) (*runtimeapi.ImageFsInfoResponse, error) {
	f.calls++
	if f.err != nil {
		return nil, f.err
	}
	return &runtimeapi.ImageFsInfoResponse{ImageFilesystems: []*runtimeapi.FilesystemUsage{
		{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: "/var/lib/images"}},
	}}, nil
}

// The runtime is asked where its images are once, not at every pass; a failed answer is not kept.
func TestImageFsMountpointAsksOnce(t *testing.T) {
	svc := &imageFsInfoer{err: errors.New("unavailable")}
	at := ImageFsMountpoint(svc)
	if dir, err := at(context.Background()); err == nil || dir != "" {
		t.Fatalf("runtime away: %q, %v", dir, err)
	}
	svc.err = nil
	for range 3 {
		if dir, err := at(context.Background()); err != nil || dir != "/var/lib/images" {
			t.Fatalf("mountpoint %q, %v", dir, err)
		}
	}
	if svc.calls != 2 {
		t.Errorf("ImageFsInfo called %d times, want 2 (the failure, then once)", svc.calls)
	}
}
