package kuberuntime

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Versioner is CRI's Version.
type Versioner interface {
	Version(ctx context.Context, in *runtimeapi.VersionRequest, opts ...grpc.CallOption) (*runtimeapi.VersionResponse, error)
}

// RuntimeName is the runtime's name as CRI Version gives it, which container IDs in pod statuses
// carry ("containerd://…"); "" until the runtime first answers.
type RuntimeName struct {
	runtime  Versioner
	endpoint string
	log      *slog.Logger
	name     atomic.Pointer[string]
}

// NewRuntimeName asks runtime, found at endpoint, once Run starts.
func NewRuntimeName(runtime Versioner, endpoint string, log *slog.Logger) *RuntimeName {
	return &RuntimeName{runtime: runtime, endpoint: endpoint, log: log}
}

// Get returns the name learnt so far.
func (r *RuntimeName) Get() string {
	if p := r.name.Load(); p != nil {
		return *p
	}
	return ""
}

// Run asks every second until the runtime answers Version, then records its name.
func (r *RuntimeName) Run(ctx context.Context) error {
	for {
		v, err := r.runtime.Version(ctx, &runtimeapi.VersionRequest{})
		if err == nil {
			name := v.RuntimeName
			r.name.Store(&name)
			r.log.Info("container runtime", "name", v.RuntimeName, "version", v.RuntimeVersion, "cri", v.RuntimeApiVersion)
			return nil
		}
		r.log.Warn("container runtime not answering yet", "endpoint", r.endpoint, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}
