package kuberuntime

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/volumemanager"
)

// resourceFieldRef is an env resourceFieldRef's value, computed as the downwardAPI volume files'
// are (one implementation): divided by the divisor, rounded up, and an unset limit is the node's
// allocatable amount. In env the container name may be left out: it is then this container.
func (m *Manager) resourceFieldRef(pod *v1.Pod, c *v1.Container, r *v1.ResourceFieldSelector) (string, error) {
	ref := *r
	if ref.ContainerName == "" {
		ref.ContainerName = c.Name
	}
	var alloc v1.ResourceList
	if m.Allocatable != nil {
		alloc = m.Allocatable()
	}
	return volumemanager.ResourceFieldValue(pod, &ref, alloc)
}
