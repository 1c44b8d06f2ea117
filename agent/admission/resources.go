package admission

import (
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodelet/nodelet/agent/internal/resourcename"
)

// InsufficientResource is one resource the node lacks for a pod. Quantities are in the unit the
// scheduler counts them in: millicores for cpu, bytes, pods, and plain units for the rest.
type InsufficientResource struct {
	Name      v1.ResourceName
	Requested int64
	Used      int64
	Capacity  int64
}

func (r InsufficientResource) Error() string {
	return fmt.Sprintf("Node didn't have enough resource: %s, requested: %d, used: %d, capacity: %d",
		r.Name, r.Requested, r.Used, r.Capacity)
}

// amounts are resource quantities in their counting unit.
type amounts map[v1.ResourceName]int64

// counted converts a ResourceList to amounts, keeping only what the scheduler accounts for (pods
// are counted by number, not by a request).
func counted(rl v1.ResourceList) amounts {
	out := amounts{}
	for name, q := range rl {
		switch {
		case name == v1.ResourceCPU:
			out[name] = q.MilliValue()
		case name == v1.ResourceMemory, name == v1.ResourceEphemeralStorage, name == v1.ResourcePods, isScalar(name):
			out[name] = q.Value()
		}
	}
	return out
}

// fitsResources returns what the node lacks for pod beside active, each resource at most once, in
// a fixed order (pods, cpu, memory, ephemeral-storage, then the rest by name) so the first reason
// of a pod short of several is always the same.
func fitsResources(pod *v1.Pod, active []*v1.Pod, allocatable v1.ResourceList) []InsufficientResource {
	alloc := counted(allocatable)
	var short []InsufficientResource
	if n := int64(len(active)); n+1 > alloc[v1.ResourcePods] {
		short = append(short, InsufficientResource{Name: v1.ResourcePods, Requested: 1, Used: n, Capacity: alloc[v1.ResourcePods]})
	}

	// Pods come as allocated: the allocation manager gives each the resources it was granted (a
	// resize the spec asks for counts only once accepted). A new pod has not run, so only that
	// counts; a running pod counts the larger of it and what its status reports (a resize the
	// runtime has not finished, or not yet shrunk to), as the kubelet counts them.
	want := counted(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}))
	used := amounts{}
	for _, p := range active {
		for name, v := range counted(resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{UseStatusResources: true})) {
			used[name] += v
		}
	}

	names := make([]v1.ResourceName, 0, len(want))
	for name, v := range want {
		if v <= 0 || name == v1.ResourcePods {
			continue
		}
		// Extended resources the node does not advertise are served by the cluster (or by DRA), not
		// by this node's device plugins: the kubelet leaves them out rather than reject every pod
		// asking for them.
		if _, ok := alloc[name]; !ok && resourcename.IsExtended(string(name)) {
			continue
		}
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		ri, rj := rank(names[i]), rank(names[j])
		if ri != rj {
			return ri < rj
		}
		return names[i] < names[j]
	})
	for _, name := range names {
		if want[name] > alloc[name]-used[name] {
			short = append(short, InsufficientResource{Name: name, Requested: want[name], Used: used[name], Capacity: alloc[name]})
		}
	}
	return short
}

func rank(name v1.ResourceName) int {
	switch name {
	case v1.ResourceCPU:
		return 0
	case v1.ResourceMemory:
		return 1
	case v1.ResourceEphemeralStorage:
		return 2
	}
	return 3
}

// isScalar reports the resources the scheduler accounts for beyond cpu, memory and storage:
// extended resources, huge pages, prefixed native ones and attachable volumes.
func isScalar(name v1.ResourceName) bool {
	s := string(name)
	return resourcename.IsExtended(string(name)) || strings.HasPrefix(s, v1.ResourceHugePagesPrefix) ||
		strings.Contains(s, v1.ResourceDefaultNamespacePrefix) || strings.HasPrefix(s, v1.ResourceAttachableVolumesPrefix)
}
