package cri

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func (s *RuntimeService) ListPodSandbox(ctx context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	return &runtimeapi.ListPodSandboxResponse{Items: s.eng.ListSandboxes(req.GetFilter())}, nil
}

// streamChunk bounds one StreamPodSandboxes message well below gRPC's message size limit.
const streamChunk = 256

func (s *RuntimeService) StreamPodSandboxes(req *runtimeapi.StreamPodSandboxesRequest, stream runtimeapi.RuntimeService_StreamPodSandboxesServer) error {
	items := s.eng.ListSandboxes(req.GetFilter())
	for len(items) > 0 {
		n := min(len(items), streamChunk)
		if err := stream.Send(&runtimeapi.StreamPodSandboxesResponse{PodSandboxes: items[:n]}); err != nil {
			return err
		}
		items = items[n:]
	}
	return nil
}
