package userns

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// StatusClient is the part of the CRI RuntimeService the handler check uses.
type StatusClient interface {
	Status(ctx context.Context, in *runtimeapi.StatusRequest, opts ...grpc.CallOption) (*runtimeapi.StatusResponse, error)
}

// RuntimeHandlers answers from the runtime's Status which handlers run pods in user namespaces
// of their own (features.user_namespaces), as the kubelet reads them.
type RuntimeHandlers struct {
	Runtime StatusClient
}

// SupportsUserNamespaces reports the handler's feature. A runtime that lists no handlers at all
// (containerd 1.6, which predates the field) supports none; a handler it does not list is an
// error, as with the kubelet.
func (r RuntimeHandlers) SupportsUserNamespaces(ctx context.Context, handler string) (bool, error) {
	st, err := r.Runtime.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return false, fmt.Errorf("runtime status: %w", err)
	}
	hs := st.GetRuntimeHandlers()
	if len(hs) == 0 {
		return false, nil
	}
	for _, h := range hs {
		if h.GetName() == handler {
			return h.GetFeatures().GetUserNamespaces(), nil
		}
	}
	return false, fmt.Errorf("the handler %q is not known", handler)
}
