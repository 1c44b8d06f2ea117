package agent

import (
	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/allocation"
	"github.com/nodelet/nodelet/agent/cm/cpumanager"
)

// wireAllocation builds the allocation manager (in-place pod resize) and hands it to the parts
// that use it: admission goes through it (AddPod) so pods are admitted beside the others'
// allocations and their own is recorded; workers sync pods as allocated; the runtime manager
// records what each container was given and resizes pod cgroups with them.
//
// Under the CPU manager's static policy a Guaranteed pod's cpu resize is Infeasible, as in the
// kubelet (its exclusive CPUs are not resized).
func (a *Agent) wireAllocation() error {
	alloc, err := allocation.New(allocation.Deps{RootDir: a.cfg.RootDir, Admit: a.admission.Admit, ActivePods: a.state.ActivePods,
		Allocatable: a.cm.AllocatableAbsolute, Recorder: a.events, Log: a.log,
		StaticCPUPolicy: func() bool { return a.cpus != nil && a.cpus.Policy() == cpumanager.PolicyStatic }})
	if err != nil {
		return err
	}
	a.alloc = alloc
	a.manager.Allocation = alloc
	if a.qos != nil {
		a.manager.PodCgroups = a.qos
	}
	a.syncer.Allocation = alloc
	return nil
}

// allocatedPods are the active pods as allocated: the eviction manager ranks pods by what they
// hold, not by a resize they have not been granted.
func (a *Agent) allocatedPods() []*v1.Pod {
	if a.alloc == nil {
		return a.state.ActivePods()
	}
	return a.alloc.AllocatedPods(a.state.ActivePods())
}
