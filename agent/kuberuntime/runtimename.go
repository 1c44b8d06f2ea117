package kuberuntime

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Versioner is CRI's Version.
type Versioner interface {
	Version(ctx context.Context, in *runtimeapi.VersionRequest, opts ...grpc.CallOption) (*runtimeapi.VersionResponse, error)
}

// runtimeConfigurer is CRI's RuntimeConfig, which runtimes of CRI v1.31 and later answer.
type runtimeConfigurer interface {
	RuntimeConfig(ctx context.Context, in *runtimeapi.RuntimeConfigRequest, opts ...grpc.CallOption) (*runtimeapi.RuntimeConfigResponse, error)
}

// RuntimeName is the runtime's name as CRI Version gives it, which container IDs in pod statuses
// carry ("containerd://…"); "" until the runtime first answers.
type RuntimeName struct {
	runtime  Versioner
	endpoint string
	log      *slog.Logger
	name     atomic.Pointer[string]
	// checkDriver: the agent keeps the pods' cgroups, with the cgroupfs driver, so a runtime that
	// places containers with another driver cannot run its pods.
	checkDriver bool
}

// NewRuntimeName asks runtime, found at endpoint, once Run starts; checkDriver has Run refuse a
// runtime whose RuntimeConfig names a cgroup driver other than cgroupfs.
func NewRuntimeName(runtime Versioner, endpoint string, checkDriver bool, log *slog.Logger) *RuntimeName {
	return &RuntimeName{runtime: runtime, endpoint: endpoint, checkDriver: checkDriver, log: log}
}

// Get returns the name learnt so far.
func (r *RuntimeName) Get() string {
	if p := r.name.Load(); p != nil {
		return *p
	}
	return ""
}

// Run asks every second until the runtime answers Version, then records its name and, as the
// kubelet 1.31+ asks the runtime for its cgroup driver, checks it: an error means the agent
// cannot run pods on this runtime.
func (r *RuntimeName) Run(ctx context.Context) error {
	for {
		v, err := r.runtime.Version(ctx, &runtimeapi.VersionRequest{})
		if err == nil {
			name := v.RuntimeName
			r.name.Store(&name)
			r.log.Info("container runtime", "name", v.RuntimeName, "version", v.RuntimeVersion, "cri", v.RuntimeApiVersion)
			return r.checkCgroupDriver(ctx, v.RuntimeName)
		}
		r.log.Warn("container runtime not answering yet", "endpoint", r.endpoint, "err", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// checkCgroupDriver refuses a runtime that says it places containers with the systemd driver; one
// that does not answer RuntimeConfig is taken to use the configured cgroupfs, as the kubelet
// falls back to its configuration.
func (r *RuntimeName) checkCgroupDriver(ctx context.Context, name string) error {
	rc, ok := r.runtime.(runtimeConfigurer)
	if !r.checkDriver || !ok {
		return nil
	}
	resp, err := rc.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
	if status.Code(err) == codes.Unimplemented {
		r.log.Info("the container runtime does not answer RuntimeConfig: using the cgroupfs cgroup driver of the configuration")
		return nil
	}
	if err != nil {
		return fmt.Errorf("the container runtime's RuntimeConfig: %w", err)
	}
	if d := resp.GetLinux().GetCgroupDriver(); d != runtimeapi.CgroupDriver_CGROUPFS {
		return fmt.Errorf("container runtime %s uses the %s cgroup driver (its RuntimeConfig says so), and nodelet's agent keeps "+
			"pods' cgroups with cgroupfs only: configure the runtime for cgroupfs (containerd: SystemdCgroup = false in the runc "+
			"options; CRI-O: cgroup_manager = \"cgroupfs\")", name, strings.ToLower(d.String()))
	}
	return nil
}
