package kuberuntime

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// UserNamespaces gives each pod its user namespace options (*userns.Manager): the host's, or
// for spec.hostUsers: false a range of host IDs of its own, refused where the pod's runtime
// handler has no user namespaces.
type UserNamespaces interface {
	GetOrCreateUserNamespaceMappings(ctx context.Context, pod *v1.Pod, handler string) (*runtimeapi.UserNamespace, error)
}

// podUserns is the pod's NamespaceOption.userns_options, for its sandbox and every container,
// as the kubelet sends it: mode NODE unless spec.hostUsers is false. Only then is the handler
// looked up (a RuntimeClass read for every sync of every pod would be wasted).
func (m *Manager) podUserns(ctx context.Context, pod *v1.Pod) (*runtimeapi.UserNamespace, error) {
	if pod.Spec.HostUsers == nil || *pod.Spec.HostUsers {
		return &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE}, nil
	}
	if m.Userns == nil {
		return nil, errors.New("can't set `spec.hostUsers: false`: this agent has no user namespace manager")
	}
	handler, err := m.runtimeHandler(ctx, pod)
	if err != nil {
		return nil, err
	}
	return m.Userns.GetOrCreateUserNamespaceMappings(ctx, pod, handler)
}

// applyContainerUserns puts the pod's user namespace into the container's namespace options and,
// for a pod of its own, its mappings on every mount, as the kubelet does: the runtime then mounts
// each volume idmapped (containerd 2, CRI-O and nodelet's runtime do), so the volume's files
// look to the pod as they would to a pod of the host's IDs, and what its root writes lands as
// the host's root would write it.
func applyContainerUserns(cfg *runtimeapi.ContainerConfig, u *runtimeapi.UserNamespace) {
	cfg.Linux.SecurityContext.NamespaceOptions.UsernsOptions = u
	if u.GetMode() != runtimeapi.NamespaceMode_POD {
		return
	}
	for _, mnt := range cfg.Mounts {
		mnt.UidMappings, mnt.GidMappings = u.Uids, u.Gids
	}
}
