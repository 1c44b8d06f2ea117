package devicemanager

import (
	"maps"
	"slices"

	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// ContainerDevices are a container's devices as the PodResources API lists them: one entry per
// device and NUMA node (none for a device without topology), by resource then device.
func (m *Manager) ContainerDevices(podUID, container string) []*podresourcesv1.ContainerDevices {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*podresourcesv1.ContainerDevices
	resources := m.pods[podUID][container]
	for _, resource := range slices.Sorted(maps.Keys(resources)) {
		ids := resources[resource].ids
		for _, numa := range slices.Sorted(maps.Keys(ids)) {
			for _, id := range slices.Sorted(slices.Values(ids[numa])) {
				d := &podresourcesv1.ContainerDevices{ResourceName: resource, DeviceIds: []string{id}}
				if numa != noTopology {
					d.Topology = &podresourcesv1.TopologyInfo{Nodes: []*podresourcesv1.NUMANode{{ID: numa}}}
				}
				out = append(out, d)
			}
		}
	}
	return out
}

// AllocatableDevices are the healthy devices of every plugin, as the PodResources API lists them.
func (m *Manager) AllocatableDevices() []*podresourcesv1.ContainerDevices {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*podresourcesv1.ContainerDevices
	for _, resource := range slices.Sorted(maps.Keys(m.healthy)) {
		for _, id := range slices.Sorted(maps.Keys(m.healthy[resource])) {
			d := m.all[resource][id]
			if d == nil || d.Topology == nil || len(d.Topology.Nodes) == 0 {
				out = append(out, &podresourcesv1.ContainerDevices{ResourceName: resource, DeviceIds: []string{id}})
				continue
			}
			for _, n := range d.Topology.Nodes {
				out = append(out, &podresourcesv1.ContainerDevices{ResourceName: resource, DeviceIds: []string{id},
					Topology: &podresourcesv1.TopologyInfo{Nodes: []*podresourcesv1.NUMANode{{ID: n.ID}}}})
			}
		}
	}
	return out
}
