package imageservice

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ImageFsInfo reports what the image store occupies: layers as unpacked on disk plus manifests,
// configs and records, in bytes and inodes. Containers' writable layers live on the same
// filesystem, so they are reported under the same mount point.
func (s *Service) ImageFsInfo(ctx context.Context, _ *runtimeapi.ImageFsInfoRequest) (*runtimeapi.ImageFsInfoResponse, error) {
	images, containers, err := s.images.FsUsage()
	if err != nil {
		return nil, err
	}
	now := time.Now().UnixNano()
	fsID := &runtimeapi.FilesystemIdentifier{Mountpoint: s.images.Root()}
	return &runtimeapi.ImageFsInfoResponse{
		ImageFilesystems: []*runtimeapi.FilesystemUsage{{
			Timestamp:  now,
			FsId:       fsID,
			UsedBytes:  &runtimeapi.UInt64Value{Value: uint64(images.Bytes)},
			InodesUsed: &runtimeapi.UInt64Value{Value: uint64(images.Inodes)},
		}},
		ContainerFilesystems: []*runtimeapi.FilesystemUsage{{
			Timestamp:  now,
			FsId:       fsID,
			UsedBytes:  &runtimeapi.UInt64Value{Value: uint64(containers.Bytes)},
			InodesUsed: &runtimeapi.UInt64Value{Value: uint64(containers.Inodes)},
		}},
	}, nil
}
