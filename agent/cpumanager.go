package agent

import (
	"fmt"
	"log/slog"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"

	"github.com/nodelet/nodelet/agent/agentconfig"
	"github.com/nodelet/nodelet/agent/cm/cpumanager"
)

// sysfs is where the CPU topology is read.
const sysfs = "/sys"

// newCPUManager builds the CPU manager and checks the topology manager's policy against the
// machine: single-numa-node is only accepted where it cannot fail, on one NUMA node.
func newCPUManager(cfg agentconfig.Config, a *Agent, log *slog.Logger) (*cpumanager.Manager, error) {
	topo := a.deps.CPUTopology
	if topo == nil && (cfg.CPUManagerPolicy == cpumanager.PolicyStatic || cfg.TopologyManagerPolicy == "single-numa-node") {
		var err error
		if topo, err = cpumanager.ReadTopology(sysfs); err != nil {
			return nil, fmt.Errorf("CPU topology: %w", err)
		}
	}
	if topo != nil {
		if n := topo.NUMANodes(); cfg.TopologyManagerPolicy == "single-numa-node" && n > 1 {
			return nil, fmt.Errorf("topologyManagerPolicy: single-numa-node: this machine has %d NUMA nodes; nodelet has no "+
				"NUMA-aware allocation and accepts the policy only on one", n)
		}
	}
	reserved := cpuset.New()
	if cfg.ReservedSystemCPUs != "" {
		var err error
		if reserved, err = cpuset.Parse(cfg.ReservedSystemCPUs); err != nil {
			return nil, fmt.Errorf("reservedSystemCPUs: %q: %w", cfg.ReservedSystemCPUs, err)
		}
	}
	reservedCPU := resource.Quantity{}
	for _, rl := range []v1.ResourceList{cfg.SystemReservedList, cfg.KubeReservedList} {
		if q, ok := rl[v1.ResourceCPU]; ok {
			reservedCPU.Add(q)
		}
	}
	m, err := cpumanager.New(cpumanager.Config{Policy: cfg.CPUManagerPolicy, Options: cfg.CPUManagerPolicyOptions,
		ReconcilePeriod: cfg.CPUManagerReconcilePeriod, ReservedSystemCPUs: reserved, ReservedCPU: reservedCPU, StateDir: cfg.RootDir},
		cpumanager.Deps{Topology: topo, Runtime: a.runtime, Holds: a.state.HoldsCPUs, SourcesReady: a.state.SourcesReady, Log: log})
	if err != nil {
		return nil, fmt.Errorf("CPU manager: %w", err)
	}
	return m, nil
}
