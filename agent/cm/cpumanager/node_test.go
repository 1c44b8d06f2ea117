package cpumanager

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// The configuration is checked as written: a reserved CPU list that does not parse and a
// single-numa-node policy on two NUMA nodes are refused with the setting's name; reserved cpu
// quantities of both reservations add up.
func TestNewForNode(t *testing.T) {
	twoNodes := flat(4)
	twoNodes.CPUs[2].NUMANode, twoNodes.CPUs[3].NUMANode = 1, 1
	for _, c := range []struct {
		name    string
		cfg     NodeConfig
		topo    *Topology
		wantErr string
	}{
		{name: "none", cfg: NodeConfig{Policy: PolicyNone}, topo: flat(4)},
		{name: "static, reserved list", cfg: NodeConfig{Policy: PolicyStatic, ReservedSystemCPUs: "0"}, topo: flat(4)},
		{name: "static, reserved quantities", topo: flat(4), cfg: NodeConfig{Policy: PolicyStatic,
			SystemReserved: v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")},
			KubeReserved:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m")}}},
		{name: "bad list", cfg: NodeConfig{Policy: PolicyStatic, ReservedSystemCPUs: "0-"}, topo: flat(4),
			wantErr: `reservedSystemCPUs: "0-"`},
		{name: "single-numa-node on one", cfg: NodeConfig{Policy: PolicyNone, TopologyManagerPolicy: "single-numa-node"}, topo: flat(4)},
		{name: "single-numa-node on two", cfg: NodeConfig{Policy: PolicyNone, TopologyManagerPolicy: "single-numa-node"}, topo: twoNodes,
			wantErr: "topologyManagerPolicy: single-numa-node: this machine has 2 NUMA nodes"},
		{name: "unknown policy", cfg: NodeConfig{Policy: "dynamic"}, topo: flat(4), wantErr: `CPU manager: cpuManagerPolicy "dynamic"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.cfg.StateDir = t.TempDir()
			m, err := NewForNode(c.cfg, Deps{Topology: c.topo, Runtime: &fakeRuntime{}})
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("got %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if m.Policy() != c.cfg.Policy {
				t.Errorf("policy %q", m.Policy())
			}
		})
	}
}
