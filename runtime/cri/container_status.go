package cri

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func (s *RuntimeService) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	st, info, err := s.eng.ContainerStatus(req.GetContainerId(), req.GetVerbose())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ContainerStatusResponse{Status: st, Info: info}, nil
}

func (s *RuntimeService) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	return &runtimeapi.ListContainersResponse{Containers: s.eng.ListContainers(req.GetFilter())}, nil
}
