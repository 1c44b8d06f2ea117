package cpumanager

import "k8s.io/utils/cpuset"

// ContainerCPUs are the container's exclusive CPUs, for the PodResources API: monitoring and
// device agents read there which CPUs a pinned container owns. A container on the shared pool
// (and every container under the none policy) has none, so it gets an empty list, not the pool:
// the kubelet answers with GetExclusiveCPUs, not with the container's affinity.
func (m *Manager) ContainerCPUs(podUID, container string) []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	set, _ := m.st.assigned(podUID, container)
	return ids(set)
}

// AllocatableCPUs are the CPUs exclusive assignments may ever come from (the online CPUs less
// the reserved ones), for the PodResources API: agents size what they may place against it.
// It is what may be handed out, not what is free now. Under the none policy no CPU is ever
// handed out, so it is empty, as the kubelet's.
func (m *Manager) AllocatableCPUs() []int64 {
	if m.cfg.Policy != PolicyStatic {
		return []int64{}
	}
	return ids(m.deps.Topology.All().Difference(m.reserved))
}

// ids is the set as the API's CPU IDs, ascending (List sorts).
func ids(set cpuset.CPUSet) []int64 {
	out := make([]int64, 0, set.Size())
	for _, id := range set.List() {
		out = append(out, int64(id))
	}
	return out
}
