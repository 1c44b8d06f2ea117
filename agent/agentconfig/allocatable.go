package agentconfig

import (
	"errors"
	"slices"

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
	if c.EnforceNodeAllocatable == nil {
		c.EnforceNodeAllocatable = []string{}
		if c.CgroupRoot != "" {
			c.EnforceNodeAllocatable = []string{cm.EnforcePods}
		}
	}
	if err := cm.CheckEnforcement(c.EnforceNodeAllocatable, c.CgroupRoot != "", c.SystemReservedCgroup, c.KubeReservedCgroup,
		c.SystemReservedList, c.KubeReservedList); err != nil {
		errs = append(errs, err)
	}
	// After the thresholds were parsed (Complete does that first): a hard memory.available
	// threshold also guards the pods' cgroup when it is capped.
	if c.EvictionThresholds, err = eviction.WithAllocatable(c.EvictionThresholds, slices.Contains(c.EnforceNodeAllocatable, cm.EnforcePods)); err != nil {
		errs = append(errs, err)
	}
	if c.PodPidsLimit > 0 && c.CgroupRoot == "" {
		errs = append(errs, errors.New("podPidsLimit needs the pods' cgroups (cgroupsPerQOS true, a non-empty --cgroup-root)"))
	}
	return errors.Join(errs...)
}
