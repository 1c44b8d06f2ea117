package nodestatus

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/internal/resourcename"
)

// ownResource reports whether the agent answers for a resource of the Node's capacity: the machine's
// cpu, memory and huge pages, pods, and the root filesystem's ephemeral-storage. Every other name —
// an extended resource an operator or a controller patched into status.capacity (example.com/dongle)
// — is someone else's, so a status update keeps it, as the kubelet's setters leave alone what they
// do not compute. A huge page size the kernel no longer offers is dropped: the kubelet removes
// those when it registers again, and an agent that restarted is the only way the sizes change.
func ownResource(name v1.ResourceName) bool {
	switch name {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourcePods, v1.ResourceEphemeralStorage:
		return true
	}
	return strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix)
}

// setResources writes the agent's capacity and allocatable into s, keeping the capacity of the
// resources others advertise. Their allocatable follows their capacity, as with the kubelet, which
// reserves nothing of them (systemReserved and kubeReserved take only cpu, memory,
// ephemeral-storage and pid); an allocatable left without its capacity goes.
//
// The device plugins' resources are the device manager's (setDeviceResources).
func setResources(s *v1.NodeStatus, capacity, allocatable v1.ResourceList) {
	others := v1.ResourceList{}
	for name, q := range s.Capacity {
		if _, given := capacity[name]; !given && !ownResource(name) {
			others[name] = q
		}
	}
	s.Capacity = capacity.DeepCopy()
	if s.Capacity == nil {
		s.Capacity = v1.ResourceList{}
	}
	s.Allocatable = allocatable.DeepCopy()
	if s.Allocatable == nil {
		s.Allocatable = v1.ResourceList{}
	}
	for name, q := range others {
		s.Capacity[name] = q
		a := q.DeepCopy()
		if a.Sign() < 0 {
			a.Set(0)
		}
		s.Allocatable[name] = a
	}
}

// DeviceResources are the device plugins' share of the Node (*devicemanager.Manager).
type DeviceResources interface {
	// Capacity gives each plugin's devices (capacity) and healthy devices (allocatable), and
	// the resources whose plugin is gone for good, each named once.
	Capacity() (capacity, allocatable v1.ResourceList, removed []string)
	// ShouldResetExtendedResourceCapacity: the agent started without a device checkpoint.
	ShouldResetExtendedResourceCapacity() bool
}

// setDeviceResources writes the device plugins' resources over s, as the kubelet's setter does: a
// plugin's resource is its devices and healthy devices, a withdrawn one stays at zero. When reset,
// every extended resource is zeroed first: at registration over an existing Node, an agent
// without a device checkpoint takes the Node for an earlier life's, whose device plugins have yet
// to come back, as the kubelet does (an extended resource patched in by hand is zeroed then too).
func setDeviceResources(s *v1.NodeStatus, d DeviceResources, reset bool) {
	if reset {
		for name := range s.Capacity {
			if resourcename.IsExtended(string(name)) {
				s.Capacity[name] = *resource.NewQuantity(0, resource.DecimalSI)
				s.Allocatable[name] = *resource.NewQuantity(0, resource.DecimalSI)
			}
		}
	}
	capacity, allocatable, removed := d.Capacity()
	for name, q := range capacity {
		s.Capacity[name] = q
	}
	for name, q := range allocatable {
		s.Allocatable[name] = q
	}
	for _, name := range removed {
		s.Capacity[v1.ResourceName(name)] = *resource.NewQuantity(0, resource.DecimalSI)
		s.Allocatable[v1.ResourceName(name)] = *resource.NewQuantity(0, resource.DecimalSI)
	}
}
