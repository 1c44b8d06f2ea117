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
	if c.SystemReservedList, err = cm.ParseReservation("systemReserved", c.SystemReserved); err != nil {
		errs = append(errs, err)
	}
	if c.KubeReservedList, err = cm.ParseReservation("kubeReserved", c.KubeReserved); err != nil {
		errs = append(errs, err)
	}
	if err := completeCPUManager(c); err != nil {
		errs = append(errs, err)
	}
	if c.EnforceNodeAllocatable == nil {
		c.EnforceNodeAllocatable = []string{}
		if c.PodsCgroup != "" {
			c.EnforceNodeAllocatable = []string{cm.EnforcePods}
		}
	}
	if err := cm.CheckEnforcement(c.EnforceNodeAllocatable, c.PodsCgroup != "", c.SystemReservedCgroup, c.KubeReservedCgroup,
		c.SystemReservedList, c.KubeReservedList); err != nil {
		errs = append(errs, err)
	}
	// After the thresholds were parsed (Complete does that first): a hard memory.available
	// threshold also guards the pods' cgroup when it is capped.
	if c.EvictionThresholds, err = eviction.WithAllocatable(c.EvictionThresholds, slices.Contains(c.EnforceNodeAllocatable, cm.EnforcePods)); err != nil {
		errs = append(errs, err)
	}
	if c.PodPidsLimit > 0 && c.PodsCgroup == "" {
		errs = append(errs, errors.New("podPidsLimit needs the pods' cgroups (cgroupsPerQOS true, a non-empty --cgroup-root)"))
	}
	return errors.Join(errs...)
}

// completeCPUManager checks the CPU and topology manager settings that need no look at the
// machine (agent.New checks the rest against it). reservedSystemCPUs replaces the cpu of both
// reservations by its size, as the kubelet does, so allocatable counts the CPUs it keeps.
func completeCPUManager(c *Config) error {
	var errs []error
	switch c.CPUManagerPolicy {
	case "none", "static":
	default:
		errs = append(errs, fmt.Errorf("cpuManagerPolicy: %q: not supported (none or static)", c.CPUManagerPolicy))
	}
	if c.CPUManagerReconcilePeriod <= 0 {
		errs = append(errs, fmt.Errorf("cpuManagerReconcilePeriod: %s: must be positive", c.CPUManagerReconcilePeriod))
	}
	if c.ReservedSystemCPUs != "" {
		set, err := cpuset.Parse(c.ReservedSystemCPUs)
		if err != nil {
			errs = append(errs, fmt.Errorf("reservedSystemCPUs: %q: %w", c.ReservedSystemCPUs, err))
		} else {
			delete(c.KubeReservedList, v1.ResourceCPU)
			if c.SystemReservedList == nil {
				c.SystemReservedList = v1.ResourceList{}
			}
			c.SystemReservedList[v1.ResourceCPU] = *resource.NewQuantity(int64(set.Size()), resource.DecimalSI)
		}
	}
	switch c.TopologyManagerPolicy {
	case "none", "single-numa-node":
	default:
		errs = append(errs, fmt.Errorf("topologyManagerPolicy: %q: not supported (none, or single-numa-node on a machine with one NUMA node; "+
			"best-effort and restricted need hints from NUMA-aware managers nodelet does not have)", c.TopologyManagerPolicy))
	}
	switch c.TopologyManagerScope {
	case "container", "pod":
	default:
		errs = append(errs, fmt.Errorf("topologyManagerScope: %q: not supported (container or pod)", c.TopologyManagerScope))
	}
	return errors.Join(errs...)
}
