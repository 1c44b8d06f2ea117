package nodestatus

import (
	"strings"

	v1 "k8s.io/api/core/v1"
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
// At registration over a Node that already exists the kubelet zeroes every extended resource when
// its device manager has no checkpoint, taking the Node for a recreated one whose device plugins
// have yet to come back. The agent has no device plugins, so no extended resource is its to vouch
// for or to withdraw: it keeps them then too.
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
