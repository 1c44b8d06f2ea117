package agentconfig

import (
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"github.com/nodelet/nodelet/agent/eviction"

	"github.com/nodelet/nodelet/agent/cm"
)

// completeAllocatable parses the reservations and settles enforceNodeAllocatable: left out, it is
// the kubelet's default [pods] when pods get cgroups of their own, and nothing otherwise (the
// kubelet refuses [pods] without cgroupsPerQOS; a default should not make a valid file fail).
func completeAllocatable(c *Config) error {
	var errs []error
	var err error
	if c.SystemReservedList, err = cm.ParseReservation("systemReserved", c.Kubelet.SystemReserved); err != nil {
		errs = append(errs, err)
	}
	if c.KubeReservedList, err = cm.ParseReservation("kubeReserved", c.Kubelet.KubeReserved); err != nil {
		errs = append(errs, err)
	}
	if err := completeCPUManager(c); err != nil {
		errs = append(errs, err)
	}
	if c.Kubelet.EnforceNodeAllocatable == nil {
		c.Kubelet.EnforceNodeAllocatable = []string{}
		if c.PodsCgroup != "" {
			c.Kubelet.EnforceNodeAllocatable = []string{cm.EnforcePods}
		}
	}
	if err := cm.CheckEnforcement(c.Kubelet.EnforceNodeAllocatable, c.PodsCgroup != "", c.Kubelet.SystemReservedCgroup, c.Kubelet.KubeReservedCgroup,
		c.SystemReservedList, c.KubeReservedList); err != nil {
		errs = append(errs, err)
	}
	// After the thresholds were parsed (Complete does that first): a hard memory.available
	// threshold also guards the pods' cgroup when it is capped.
	if c.EvictionThresholds, err = eviction.WithAllocatable(c.EvictionThresholds, slices.Contains(c.Kubelet.EnforceNodeAllocatable, cm.EnforcePods)); err != nil {
		errs = append(errs, err)
	}
	if *c.Kubelet.PodPidsLimit > 0 && c.PodsCgroup == "" {
		errs = append(errs, errors.New("podPidsLimit needs the pods' cgroups (cgroupsPerQOS true, a non-empty --cgroup-root)"))
	}
	return errors.Join(errs...)
}

// completeCPUManager checks the CPU and topology manager settings that need no look at the
// machine (agent.New checks the rest against it). reservedSystemCPUs replaces the cpu of both
// reservations by its size, as the kubelet does, so allocatable counts the CPUs it keeps.
func completeCPUManager(c *Config) error {
	var errs []error
	switch c.Kubelet.CPUManagerPolicy {
	case "none", "static":
	default:
		errs = append(errs, fmt.Errorf("cpuManagerPolicy: %q: not supported (none or static)", c.Kubelet.CPUManagerPolicy))
	}
	if c.Kubelet.CPUManagerReconcilePeriod.Duration <= 0 {
		errs = append(errs, fmt.Errorf("cpuManagerReconcilePeriod: %s: must be positive", c.Kubelet.CPUManagerReconcilePeriod.Duration))
	}
	if c.Kubelet.ReservedSystemCPUs != "" {
		set, err := cpuset.Parse(c.Kubelet.ReservedSystemCPUs)
		if err != nil {
			errs = append(errs, fmt.Errorf("reservedSystemCPUs: %q: %w", c.Kubelet.ReservedSystemCPUs, err))
		} else {
			delete(c.KubeReservedList, v1.ResourceCPU)
			if c.SystemReservedList == nil {
				c.SystemReservedList = v1.ResourceList{}
			}
			c.SystemReservedList[v1.ResourceCPU] = *resource.NewQuantity(int64(set.Size()), resource.DecimalSI)
		}
	}
	switch c.Kubelet.TopologyManagerPolicy {
	case "none", "single-numa-node":
	default:
		errs = append(errs, fmt.Errorf("topologyManagerPolicy: %q: not supported (none, or single-numa-node on a machine with one NUMA node; "+
			"best-effort and restricted need hints from NUMA-aware managers nodelet does not have)", c.Kubelet.TopologyManagerPolicy))
	}
	switch c.Kubelet.TopologyManagerScope {
	case "container", "pod":
	default:
		errs = append(errs, fmt.Errorf("topologyManagerScope: %q: not supported (container or pod)", c.Kubelet.TopologyManagerScope))
	}
	return errors.Join(errs...)
}
