package engine

import (
	"context"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/store"
)

func (s *Engine) ListPodSandbox(ctx context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	return &runtimeapi.ListPodSandboxResponse{Items: s.listSandboxes(req.GetFilter())}, nil
}

// streamChunk bounds one StreamPodSandboxes message well below gRPC's message size limit.
const streamChunk = 256

func (s *Engine) StreamPodSandboxes(req *runtimeapi.StreamPodSandboxesRequest, stream runtimeapi.RuntimeService_StreamPodSandboxesServer) error {
	items := s.listSandboxes(req.GetFilter())
	for len(items) > 0 {
		n := min(len(items), streamChunk)
		if err := stream.Send(&runtimeapi.StreamPodSandboxesResponse{PodSandboxes: items[:n]}); err != nil {
			return err
		}
		items = items[n:]
	}
	return nil
}

func (s *Engine) listSandboxes(f *runtimeapi.PodSandboxFilter) []*runtimeapi.PodSandbox {
	var all []*store.Sandbox
	if id := f.GetId(); id != "" {
		// An ID filter matches the full ID or a unique prefix of it, as crictl's short IDs.
		sb, err := s.sandboxes.Get(id)
		if err != nil {
			return nil
		}
		all = []*store.Sandbox{sb}
	} else {
		all = s.sandboxes.List()
	}
	out := []*runtimeapi.PodSandbox{}
	for _, sb := range all {
		if st := f.GetState(); st != nil && st.State != sb.State {
			continue
		}
		if !labelsMatch(sb.Config.GetLabels(), f.GetLabelSelector()) {
			continue
		}
		out = append(out, &runtimeapi.PodSandbox{
			Id:             sb.ID,
			Metadata:       sb.Config.GetMetadata(),
			State:          sb.State,
			CreatedAt:      sb.CreatedAt,
			Labels:         sb.Config.GetLabels(),
			Annotations:    sb.Config.GetAnnotations(),
			RuntimeHandler: sb.Handler,
		})
	}
	return out
}

// labelsMatch reports whether labels hold every pair of selector.
func labelsMatch(labels, selector map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
