package cri

import (
	"context"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func (s *RuntimeService) PodSandboxStatus(ctx context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	st, info, err := s.eng.SandboxStatus(req.GetPodSandboxId(), req.GetVerbose())
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PodSandboxStatusResponse{Status: st, Info: info, Timestamp: time.Now().UnixNano()}, nil
}
