package cpumanager

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/cpuset"
)

// sysfs is where the CPU topology is read.
const sysfs = "/sys"

// NodeConfig is the CPU manager's share of the agent's configuration, as the configuration file
// spells it.
type NodeConfig struct {
	Policy          string
	Options         map[string]string
	ReconcilePeriod time.Duration
	// ReservedSystemCPUs is reservedSystemCPUs, a cpuset list ("0,2-3"); empty reserves by
	// SystemReserved and KubeReserved cpu instead.
	ReservedSystemCPUs           string
	SystemReserved, KubeReserved v1.ResourceList
	// TopologyManagerPolicy is checked against the machine: nodelet has no NUMA-aware allocation.
	TopologyManagerPolicy string
	StateDir              string
}

// NewForNode builds the manager from the configuration, reading this machine's topology when a
// policy needs it (d.Topology, when set, stands for the machine). The topology manager's
// single-numa-node policy is only accepted where it cannot fail, on one NUMA node.
func NewForNode(c NodeConfig, d Deps) (*Manager, error) {
	if d.Topology == nil && (c.Policy == PolicyStatic || c.TopologyManagerPolicy == "single-numa-node") {
		topo, err := ReadTopology(sysfs)
		if err != nil {
			return nil, fmt.Errorf("CPU topology: %w", err)
		}
		d.Topology = topo
	}
	if d.Topology != nil {
		if n := d.Topology.NUMANodes(); c.TopologyManagerPolicy == "single-numa-node" && n > 1 {
			return nil, fmt.Errorf("topologyManagerPolicy: single-numa-node: this machine has %d NUMA nodes; nodelet has no "+
				"NUMA-aware allocation and accepts the policy only on one", n)
		}
	}
	reserved := cpuset.New()
	if c.ReservedSystemCPUs != "" {
		var err error
		if reserved, err = cpuset.Parse(c.ReservedSystemCPUs); err != nil {
			return nil, fmt.Errorf("reservedSystemCPUs: %q: %w", c.ReservedSystemCPUs, err)
		}
	}
	reservedCPU := resource.Quantity{}
	for _, rl := range []v1.ResourceList{c.SystemReserved, c.KubeReserved} {
		if q, ok := rl[v1.ResourceCPU]; ok {
			reservedCPU.Add(q)
		}
	}
	m, err := New(Config{Policy: c.Policy, Options: c.Options, ReconcilePeriod: c.ReconcilePeriod,
		ReservedSystemCPUs: reserved, ReservedCPU: reservedCPU, StateDir: c.StateDir}, d)
	if err != nil {
		return nil, fmt.Errorf("CPU manager: %w", err)
	}
	return m, nil
}
