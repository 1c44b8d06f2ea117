package metrics

import (
	"context"
	"strings"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Lister is the part of CRI that running-pod and container counts come from.
type Lister interface {
	ListPodSandbox(ctx context.Context, in *runtimeapi.ListPodSandboxRequest, opts ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error)
	ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error)
}

// RefreshRuntimeCounts sets kubelet_running_pods (ready sandboxes) and kubelet_running_containers
// (by state) from the runtime. The API server calls it before each /metrics scrape, so the figures
// are current without the agent pushing them.
func RefreshRuntimeCounts(ctx context.Context, rt Lister) error {
	sbs, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	}})
	if err != nil {
		return err
	}
	ctrs, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return err
	}
	// Count pods, not sandboxes: a pod being recreated can briefly have two ready ones.
	pods := map[string]bool{}
	for _, s := range sbs.GetItems() {
		pods[s.GetMetadata().GetUid()] = true
	}
	SetRunningPods(len(pods))
	counts := map[string]int{"running": 0, "exited": 0, "created": 0, "unknown": 0}
	for _, c := range ctrs.GetContainers() {
		state := strings.ToLower(strings.TrimPrefix(c.GetState().String(), "CONTAINER_"))
		counts[state]++
	}
	SetContainerStates(counts)
	return nil
}
