package devicemanager

import (
	"context"

	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/util/sets"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ContainerLister is the runtime call RunningContainers needs (the CRI RuntimeService).
type ContainerLister interface {
	ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error)
}

// RunningContainers lists the runtime's running containers by the pod UID and container name the
// agent labels them with, for Deps.Running.
func RunningContainers(rt ContainerLister) func(context.Context) (sets.Set[string], error) {
	return func(ctx context.Context) (sets.Set[string], error) {
		resp, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
		if err != nil {
			return nil, err
		}
		out := sets.New[string]()
		for _, c := range resp.Containers {
			uid, name := c.Labels["io.kubernetes.pod.uid"], c.Labels["io.kubernetes.container.name"]
			if uid != "" && name != "" {
				out.Insert(uid + "/" + name)
			}
		}
		return out, nil
	}
}
