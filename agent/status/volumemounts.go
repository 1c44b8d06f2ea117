package status

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// volumeMountStatuses are a container's status.volumeMounts as the kubelet reports them: every
// volumeMount of the spec (CRI knows no volume names, so they come from the spec, not the
// runtime), and for a read-only one whether it is read-only recursively: Enabled when it resolves
// so on the pod's runtime handler, Disabled otherwise, a mount that cannot be resolved included
// (its container is refused at creation with the reason).
func volumeMountStatuses(c *v1.Container, runtimeSupportsRRO bool) []v1.VolumeMountStatus {
	var out []v1.VolumeMountStatus
	for _, vm := range c.VolumeMounts {
		s := v1.VolumeMountStatus{Name: vm.Name, MountPath: vm.MountPath, ReadOnly: vm.ReadOnly}
		if vm.ReadOnly {
			mode := v1.RecursiveReadOnlyDisabled
			if rro, err := kubecontainer.ResolveRecursiveReadOnly(vm, runtimeSupportsRRO); err == nil && rro {
				mode = v1.RecursiveReadOnlyEnabled
			}
			s.RecursiveReadOnly = &mode
		}
		out = append(out, s)
	}
	return out
}
