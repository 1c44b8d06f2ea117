package devicemanager

import (
	"context"
	"fmt"
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodelet/nodelet/agent/cm/devicemanager/checkpoint"
)

// Admit gives every container of pod the devices it asks for, init containers first, as the
// kubelet's topology admit handler does: the devices of an init container that runs to completion
// go to the app containers after it. A pod is admitted whole or not at all: a refusal gives back
// what its first containers took. The error's text is the kubelet's (its admission wraps it as
// UnexpectedAdmissionError).
func (m *Manager) Admit(pod *v1.Pod) error {
	uid := string(pod.UID)
	if !m.asksDevices(pod) {
		return nil
	}
	// The plugins' calls have their own deadline (callTimeout); admission has no context.
	ctx := context.Background()
	m.learnRunning(ctx)
	m.mu.Lock()
	before := m.pods.clonePod(uid)
	m.mu.Unlock()
	undo := func() {
		m.mu.Lock()
		if before == nil {
			delete(m.pods, uid)
		} else {
			m.pods[uid] = before
		}
		m.allocated = m.pods.inUse()
		m.mu.Unlock()
	}
	m.giveBackStale()
	reusable := map[string]sets.Set[string]{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if err := m.allocateContainer(ctx, pod, c, reusable); err != nil {
			undo()
			return err
		}
		sidecar := c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
		m.mu.Lock()
		for resource, a := range m.pods[uid][c.Name] {
			if reusable[resource] == nil {
				reusable[resource] = sets.New[string]()
			}
			if sidecar {
				// A sidecar keeps its devices while the app containers run.
				reusable[resource] = reusable[resource].Difference(a.devices())
			} else {
				reusable[resource] = reusable[resource].Union(a.devices())
			}
		}
		m.mu.Unlock()
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if err := m.allocateContainer(ctx, pod, c, reusable); err != nil {
			undo()
			return err
		}
		m.mu.Lock()
		for resource, a := range m.pods[uid][c.Name] {
			if reusable[resource] != nil {
				reusable[resource] = reusable[resource].Difference(a.devices())
			}
		}
		m.mu.Unlock()
	}
	return m.writeCheckpoint()
}

// asksDevices reports whether any container of pod is limited in a device plugin's resource.
func (m *Manager) asksDevices(pod *v1.Pod) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			for name := range c.Resources.Limits {
				if m.isDeviceResource(string(name)) {
					return true
				}
			}
		}
	}
	return false
}

// isDeviceResource: a plugin registered it, or pods hold its devices. Called with mu held.
func (m *Manager) isDeviceResource(resource string) bool {
	_, registered := m.healthy[resource]
	_, held := m.allocated[resource]
	return registered || held
}

// giveBackStale frees the devices of pods that no longer hold them, once every source has spoken.
func (m *Manager) giveBackStale() {
	if !m.deps.SourcesReady() {
		return
	}
	m.mu.Lock()
	var gone []string
	for uid := range m.pods {
		if !m.deps.Holds(uid) {
			gone = append(gone, uid)
		}
	}
	for _, uid := range gone {
		delete(m.pods, uid)
	}
	if len(gone) > 0 {
		m.allocated = m.pods.inUse()
	}
	m.mu.Unlock()
	if len(gone) > 0 {
		m.log.Info("devices given back", "podUIDs", gone)
		m.writeCheckpoint()
	}
}

// allocateContainer gives c the devices of each device resource it is limited in (extended
// resources are not overcommitted: the request equals the limit), calling the plugin's Allocate
// for those it did not hold yet.
func (m *Manager) allocateContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, reusable map[string]sets.Set[string]) error {
	uid := string(pod.UID)
	names := make([]string, 0, len(c.Resources.Limits))
	for name := range c.Resources.Limits {
		names = append(names, string(name))
	}
	sort.Strings(names)
	for _, resource := range names {
		q := c.Resources.Limits[v1.ResourceName(resource)]
		m.mu.Lock()
		device := m.isDeviceResource(resource)
		m.mu.Unlock()
		if !device {
			continue
		}
		ids, err := m.devicesToAllocate(ctx, uid, c.Name, resource, int(q.Value()), reusable[resource])
		if err != nil {
			return err
		}
		if ids.Len() == 0 {
			continue
		}
		m.mu.Lock()
		e := m.endpoints[resource]
		m.mu.Unlock()
		if e == nil {
			m.resetAllocated()
			return fmt.Errorf("unknown Device Plugin %s", resource)
		}
		resp, err := e.allocate(ctx, sets.List(ids))
		if err != nil {
			m.resetAllocated()
			return err
		}
		if len(resp.ContainerResponses) == 0 || resp.ContainerResponses[0] == nil {
			m.resetAllocated()
			return fmt.Errorf("no containers return in allocation response %v", resp)
		}
		m.mu.Lock()
		perNUMA := checkpoint.DevicesPerNUMA{}
		for _, id := range sets.List(ids) {
			d := m.all[resource][id]
			if d == nil || d.Topology == nil || len(d.Topology.Nodes) == 0 {
				perNUMA[noTopology] = append(perNUMA[noTopology], id)
				continue
			}
			for _, n := range d.Topology.Nodes {
				perNUMA[n.ID] = append(perNUMA[n.ID], id)
			}
		}
		m.pods.insert(uid, c.Name, resource, allocation{ids: perNUMA, resp: resp.ContainerResponses[0]})
		m.mu.Unlock()
	}
	return nil
}

// resetAllocated recomputes the held devices from the allocations, dropping those taken by an
// allocation that failed.
func (m *Manager) resetAllocated() {
	m.mu.Lock()
	m.allocated = m.pods.inUse()
	m.mu.Unlock()
}

// devicesToAllocate picks the devices container still needs of resource: none when it holds them
// already (a restart, an agent restarted) or when it was found running at the start; else from
// the devices its pod's finished init containers free, then the plugin's preferred ones, then any
// healthy free device. The picked devices count as held from here on.
func (m *Manager) devicesToAllocate(ctx context.Context, uid, container, resource string, required int, reusable sets.Set[string]) (sets.Set[string], error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	needed := required
	held := m.pods.containerDevices(uid, container, resource)
	if held != nil {
		needed -= held.Len()
		if needed != 0 {
			return nil, fmt.Errorf("pod %q container %q changed request for resource %q from %d to %d", uid, container, resource, held.Len(), required)
		}
	}
	// An agent restarted finds containers running: they have their devices already.
	if !m.deps.SourcesReady() && m.running.Has(uid+"/"+container) {
		return nil, nil
	}
	healthy, registered := m.healthy[resource]
	if !registered {
		return nil, fmt.Errorf("cannot allocate unregistered device %s", resource)
	}
	if healthy.Len() == 0 {
		return nil, fmt.Errorf("no healthy devices present; cannot allocate unhealthy devices %s", resource)
	}
	if !healthy.IsSuperset(held) {
		return nil, fmt.Errorf("previously allocated devices are no longer healthy; cannot allocate unhealthy devices %s", resource)
	}
	if needed == 0 {
		return nil, nil
	}
	picked := sets.New[string]()
	take := func(from []string) bool {
		if m.allocated[resource] == nil {
			m.allocated[resource] = sets.New[string]()
		}
		for _, id := range from {
			if needed == 0 {
				break
			}
			if picked.Has(id) {
				continue
			}
			m.allocated[resource].Insert(id)
			picked.Insert(id)
			needed--
		}
		return needed == 0
	}
	if take(sets.List(reusable)) {
		return picked, nil
	}
	available := healthy.Difference(m.allocated[resource])
	if available.Len() < needed {
		return nil, fmt.Errorf("requested number of devices unavailable for %s. Requested: %d, Available: %d", resource, needed, available.Len())
	}
	// nodelet's topology manager gives no NUMA hints (docs/kubeletconfig.md), so every device is
	// as good as another: the plugin may choose, else the lowest IDs go first.
	if e := m.endpoints[resource]; e != nil && e.opts.GetGetPreferredAllocationAvailable() {
		m.mu.Unlock()
		resp, err := e.preferred(ctx, sets.List(available.Union(picked)), sets.List(picked), required)
		m.mu.Lock()
		if err != nil {
			return nil, fmt.Errorf("device plugin GetPreferredAllocation rpc failed with err: %w", err)
		}
		if resp != nil && len(resp.ContainerResponses) > 0 && resp.ContainerResponses[0] != nil {
			// Only devices still free count: the lock was let go for the call.
			free := healthy.Difference(m.allocated[resource])
			if take(sets.List(sets.New(resp.ContainerResponses[0].DeviceIDs...).Intersection(free))) {
				return picked, nil
			}
		}
		available = healthy.Difference(m.allocated[resource])
	}
	if take(sets.List(available)) {
		return picked, nil
	}
	return nil, fmt.Errorf("unexpectedly allocated less resources than required. Requested: %d, Got: %d", required, required-needed)
}

// RunContainerOptions is what the plugins' Allocate answers give c (nil: no devices), after the
// PreStartContainer call of the plugins that ask for one. A container without its allocation
// (an agent restarted before its plugin re-registered) is allocated first.
func (m *Manager) RunContainerOptions(ctx context.Context, pod *v1.Pod, c *v1.Container) (*pluginapi.ContainerAllocateResponse, error) {
	uid := string(pod.UID)
	missing := false
	names := make([]string, 0, len(c.Resources.Limits))
	for name, q := range c.Resources.Limits {
		m.mu.Lock()
		device := m.isDeviceResource(string(name))
		m.mu.Unlock()
		if device && q.Value() > 0 {
			names = append(names, string(name))
		}
	}
	sort.Strings(names)
	for _, resource := range names {
		m.mu.Lock()
		held := m.pods.containerDevices(uid, c.Name, resource)
		m.mu.Unlock()
		if held == nil {
			missing = true
		}
	}
	if missing {
		if err := m.allocateContainer(ctx, pod, c, nil); err != nil {
			return nil, err
		}
		if err := m.writeCheckpoint(); err != nil {
			return nil, err
		}
	}
	for _, resource := range names {
		if err := m.preStart(ctx, uid, c.Name, resource); err != nil {
			return nil, err
		}
	}
	m.mu.Lock()
	resources := m.pods[uid][c.Name]
	m.mu.Unlock()
	if len(resources) == 0 {
		return nil, nil
	}
	return merged(resources, m.log), nil
}

// preStart calls the plugin's PreStartContainer with the container's devices, if it asked for it.
func (m *Manager) preStart(ctx context.Context, uid, container, resource string) error {
	m.mu.Lock()
	e := m.endpoints[resource]
	if e == nil {
		m.mu.Unlock()
		return fmt.Errorf("endpoint not found in cache for a registered resource: %s", resource)
	}
	if !e.opts.GetPreStartRequired() {
		m.mu.Unlock()
		return nil
	}
	held := m.pods.containerDevices(uid, container, resource)
	m.mu.Unlock()
	if held == nil {
		return fmt.Errorf("no devices found allocated in local cache for pod %s, container %s, resource %s", uid, container, resource)
	}
	if err := e.preStart(ctx, sets.List(held)); err != nil {
		return fmt.Errorf("device plugin PreStartContainer rpc failed with err: %w", err)
	}
	return nil
}
