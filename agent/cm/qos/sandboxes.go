package qos

import (
	"context"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// SandboxLister is CRI's ListPodSandbox.
type SandboxLister interface {
	ListPodSandbox(ctx context.Context, in *runtimeapi.ListPodSandboxRequest, opts ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error)
}

// RuntimeSandboxes are the pods the runtime holds a sandbox of, whatever their state
// (Deps.RuntimePods): a pod cgroup of one of them is no orphan.
func RuntimeSandboxes(rt SandboxLister) func(ctx context.Context) (map[types.UID]bool, error) {
	return func(ctx context.Context) (map[types.UID]bool, error) {
		resp, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		if err != nil {
			return nil, err
		}
		out := map[types.UID]bool{}
		for _, s := range resp.Items {
			if uid := s.GetMetadata().GetUid(); uid != "" {
				out[types.UID(uid)] = true
			}
			if uid := s.Labels[kubecontainer.LabelPodUID]; uid != "" {
				out[types.UID(uid)] = true
			}
		}
		return out, nil
	}
}
