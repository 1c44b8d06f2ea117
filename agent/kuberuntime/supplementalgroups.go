package kuberuntime

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// podSupplementalGroupsPolicy is the pod's supplementalGroupsPolicy in CRI terms. Merge (the
// default) lets the runtime add the groups the image's /etc/group gives the user; Strict keeps
// only the ones the pod names (runAsGroup, supplementalGroups, fsGroup).
func podSupplementalGroupsPolicy(pod *v1.Pod) runtimeapi.SupplementalGroupsPolicy {
	if sc := pod.Spec.SecurityContext; sc != nil && sc.SupplementalGroupsPolicy != nil &&
		*sc.SupplementalGroupsPolicy == v1.SupplementalGroupsPolicyStrict {
		return runtimeapi.SupplementalGroupsPolicy_Strict
	}
	return runtimeapi.SupplementalGroupsPolicy_Merge
}

// supplementalGroupsPolicy is podSupplementalGroupsPolicy for a container, refused when the pod
// asks for Strict and the runtime's Status does not say it honours it: a runtime that does not
// know the field would merge the image's groups anyway. The message is the kubelet's admission one.
func (m *Manager) supplementalGroupsPolicy(ctx context.Context, pod *v1.Pod) (runtimeapi.SupplementalGroupsPolicy, error) {
	p := podSupplementalGroupsPolicy(pod)
	if p == runtimeapi.SupplementalGroupsPolicy_Strict && !m.runtimeFeatures(ctx).GetSupplementalGroupsPolicy() {
		return p, fmt.Errorf("SupplementalGroupsPolicy=%s is not supported in this node", v1.SupplementalGroupsPolicyStrict)
	}
	return p, nil
}

// toContainerUser is the runtime's report of a container's user as the API's.
func toContainerUser(u *runtimeapi.ContainerUser) *v1.ContainerUser {
	if u == nil {
		return nil
	}
	out := &v1.ContainerUser{}
	if l := u.GetLinux(); l != nil {
		out.Linux = &v1.LinuxContainerUser{UID: l.GetUid(), GID: l.GetGid(), SupplementalGroups: l.GetSupplementalGroups()}
	}
	return out
}
