// Package cm is the agent's container manager for the node's resources, after the kubelet's: the
// machine's capacity, node allocatable (capacity less systemReserved, kubeReserved and the hard
// eviction thresholds), and the cgroups that enforce it — the pods' top cgroup (kubepods) capped at
// capacity less the reservations when enforceNodeAllocatable has "pods", and the reservations
// written on their own named cgroups when it has "system-reserved" or "kube-reserved". It works on
// cgroups directly rather than through CRI, so it works the same over any runtime.
package cm

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/agent/eviction"
)

// ResourcePID is the reservable process-ID resource ("pid" in systemReserved/kubeReserved). It is
// not reported on the Node; it caps the pids of the cgroups.
const ResourcePID v1.ResourceName = "pid"

// The enforceNodeAllocatable keys, as the kubelet spells them.
const (
	EnforcePods                       = "pods"
	EnforceSystemReserved             = "system-reserved"
	EnforceKubeReserved               = "kube-reserved"
	EnforceSystemReservedCompressible = "system-reserved-compressible"
	EnforceKubeReservedCompressible   = "kube-reserved-compressible"
	EnforceNone                       = "none"
)

// ParseReservation reads a systemReserved/kubeReserved map (field names the config spelling of the
// field, for errors). Only what the kubelet lets one reserve is accepted: cpu, memory,
// ephemeral-storage and pid, each not negative.
func ParseReservation(field string, m map[string]string) (v1.ResourceList, error) {
	if len(m) == 0 {
		return nil, nil
	}
	rl := v1.ResourceList{}
	var errs []error
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name := v1.ResourceName(k)
		switch name {
		case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, ResourcePID:
		default:
			errs = append(errs, fmt.Errorf("%s: cannot reserve %q: want cpu, memory, ephemeral-storage or pid", field, k))
			continue
		}
		q, err := resource.ParseQuantity(m[k])
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s %q: %w", field, k, m[k], err))
			continue
		}
		if q.Sign() < 0 {
			errs = append(errs, fmt.Errorf("%s: %s %s: must not be negative", field, k, m[k]))
			continue
		}
		rl[name] = q
	}
	return rl, errors.Join(errs...)
}

// CheckEnforcement refuses enforceNodeAllocatable settings the kubelet refuses: unknown keys, none
// beside others, pods without per-QoS cgroups, and reserved enforcement without its named cgroup
// or its reservation.
func CheckEnforcement(keys []string, cgroupsPerQOS bool, systemReservedCgroup, kubeReservedCgroup string, systemReserved, kubeReserved v1.ResourceList) error {
	var errs []error
	for _, k := range keys {
		switch k {
		case EnforcePods, EnforceSystemReserved, EnforceKubeReserved, EnforceSystemReservedCompressible, EnforceKubeReservedCompressible:
		case EnforceNone:
			if len(keys) > 1 {
				errs = append(errs, errors.New("enforceNodeAllocatable: none cannot be combined with other keys"))
			}
		default:
			errs = append(errs, fmt.Errorf("enforceNodeAllocatable: unknown key %q: want pods, system-reserved, kube-reserved, system-reserved-compressible, kube-reserved-compressible or none", k))
		}
	}
	has := func(k string) bool { return slices.Contains(keys, k) }
	if has(EnforcePods) && !cgroupsPerQOS {
		errs = append(errs, errors.New("enforceNodeAllocatable: pods needs the pods' cgroups (cgroupsPerQOS true, a non-empty --cgroup-root)"))
	}
	for _, r := range []struct {
		name, compressible, cgroup, field string
		reserved                          v1.ResourceList
	}{
		{EnforceSystemReserved, EnforceSystemReservedCompressible, systemReservedCgroup, "systemReservedCgroup", systemReserved},
		{EnforceKubeReserved, EnforceKubeReservedCompressible, kubeReservedCgroup, "kubeReservedCgroup", kubeReserved},
	} {
		if has(r.name) && has(r.compressible) {
			errs = append(errs, fmt.Errorf("enforceNodeAllocatable: %s and %s cannot both be set", r.name, r.compressible))
		}
		if !has(r.name) && !has(r.compressible) {
			continue
		}
		if r.cgroup == "" {
			errs = append(errs, fmt.Errorf("enforceNodeAllocatable: %s needs %s, the cgroup to enforce it on", r.name, r.field))
		} else if !strings.HasPrefix(r.cgroup, "/") || strings.Contains(r.cgroup, "..") {
			errs = append(errs, fmt.Errorf("%s %q: want an absolute cgroup path (cgroupfs driver)", r.field, r.cgroup))
		}
		if len(r.reserved) == 0 {
			errs = append(errs, fmt.Errorf("enforceNodeAllocatable: %s enforces nothing without a reservation to enforce", r.name))
		}
	}
	return errors.Join(errs...)
}

// Reservation is what the node keeps from pods: systemReserved + kubeReserved + the hard eviction
// thresholds on memory.available (memory) and nodefs.available (ephemeral-storage), a percentage
// threshold taken of the capacity. Only resources in capacity count; zero amounts are left out.
func Reservation(capacity, systemReserved, kubeReserved v1.ResourceList, thresholds []eviction.Threshold) v1.ResourceList {
	evictionReserved := v1.ResourceList{}
	for _, t := range thresholds {
		if t.GracePeriod != 0 { // soft thresholds evict later; they reserve nothing
			continue
		}
		var name v1.ResourceName
		switch t.Signal {
		case eviction.SignalMemoryAvailable:
			name = v1.ResourceMemory
		case eviction.SignalNodeFsAvailable:
			name = v1.ResourceEphemeralStorage
		default:
			continue
		}
		c, ok := capacity[name]
		if !ok {
			continue
		}
		if t.Quantity != nil {
			evictionReserved[name] = t.Quantity.DeepCopy()
		} else {
			evictionReserved[name] = *resource.NewQuantity(int64(t.Percentage*float64(c.Value())), resource.BinarySI)
		}
	}
	out := v1.ResourceList{}
	for name := range capacity {
		sum := resource.NewQuantity(0, resource.DecimalSI)
		for _, rl := range []v1.ResourceList{systemReserved, kubeReserved, evictionReserved} {
			if q, ok := rl[name]; ok {
				sum.Add(q)
			}
		}
		if !sum.IsZero() {
			out[name] = *sum
		}
	}
	return out
}

// CheckReservation refuses a reservation larger than the capacity, as the kubelet refuses to start.
func CheckReservation(capacity, reservation v1.ResourceList) error {
	var errs []error
	for _, name := range sortedNames(reservation) {
		r, c := reservation[name], capacity[name]
		if r.Cmp(c) > 0 {
			errs = append(errs, fmt.Errorf("%s: reserved %s (systemReserved + kubeReserved + hard eviction) but the node has %s", name, r.String(), c.String()))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("invalid node allocatable: %w", errors.Join(errs...))
	}
	return nil
}

// Allocatable is capacity less reservation, never below zero, with memory also less what huge pages
// hold (pages reserved at boot are not memory a pod's request can get).
func Allocatable(capacity, reservation v1.ResourceList) v1.ResourceList {
	out := v1.ResourceList{}
	for name, c := range capacity {
		out[name] = subFloor(c, reservation[name])
	}
	if mem, ok := out[v1.ResourceMemory]; ok {
		for name, c := range capacity {
			if strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
				mem = subFloor(mem, c)
			}
		}
		out[v1.ResourceMemory] = mem
	}
	return out
}

// PodsLimits are the limits of the kubepods cgroup: the internal capacity (with pid), less
// systemReserved and kubeReserved when "pods" is enforced. Hard eviction thresholds are left out:
// eviction, not the OOM killer, acts on those.
func PodsLimits(internalCapacity, systemReserved, kubeReserved v1.ResourceList, enforcePods bool) v1.ResourceList {
	out := v1.ResourceList{}
	for name, c := range internalCapacity {
		if name == v1.ResourcePods || name == v1.ResourceEphemeralStorage {
			continue // neither is a cgroup limit
		}
		if enforcePods {
			c = subFloor(subFloor(c, systemReserved[name]), kubeReserved[name])
		}
		out[name] = c
	}
	return out
}

func subFloor(a, b resource.Quantity) resource.Quantity {
	a = a.DeepCopy()
	a.Sub(b)
	if a.Sign() < 0 {
		a.Set(0)
	}
	return a
}

func sortedNames(rl v1.ResourceList) []v1.ResourceName {
	names := make([]v1.ResourceName, 0, len(rl))
	for n := range rl {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}
