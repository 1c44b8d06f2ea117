// Package podstate answers what the agent's parts ask about the pods' lives — which are active,
// which have finished, which may still run containers or hold CPUs, which are gone for good — from
// the desired pods, the pod workers' phases, the kept statuses and the pod sources. The parts get
// this one narrow view instead of reaching into the agent or into each other; the agent's API reads
// the pods through it too, each with its kept status.
package podstate

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// Desired are the pods the node should run (*podmanager.Manager).
type Desired interface {
	GetPods() []*v1.Pod
	GetPodByUID(types.UID) (*v1.Pod, bool)
	// GetPodByFullName finds a pod by kubecontainer.BuildPodFullName.
	GetPodByFullName(string) (*v1.Pod, bool)
}

// Phases are where each pod's worker is (*podworkers.Phases).
type Phases interface {
	IsPodTerminationRequested(types.UID) bool
	CouldHaveRunningContainers(types.UID) bool
	IsPodKnownFinished(types.UID) bool
	Known(types.UID) bool
}

// Statuses are the pods' kept statuses (*status.Manager).
type Statuses interface {
	GetPodStatus(types.UID) (v1.PodStatus, bool)
}

// Sources are the pod sources merged (*podsource.PodConfig).
type Sources interface {
	Has(types.UID) bool
	SeenAllSources(names []string) bool
}

// Allocations are the resources each pod was given (*allocation.State).
type Allocations interface {
	AllocatedPods(pods []*v1.Pod) []*v1.Pod
}

// View is the pods' lives as the parts see them; safe for any goroutine as its sources are.
type View struct {
	pods     Desired
	phases   Phases
	statuses Statuses
	sources  Sources
	names    []string
	allocs   Allocations
}

// New reads pods, phases, statuses, sources and allocations (nil: none); names are the sources
// configured, each of which must have spoken before anything counts as gone.
func New(pods Desired, phases Phases, statuses Statuses, sources Sources, names []string, allocs Allocations) *View {
	return &View{pods: pods, phases: phases, statuses: statuses, sources: sources, names: names, allocs: allocs}
}

// Sources are the names of the sources configured.
func (v *View) Sources() []string { return v.names }

// Pods are the desired pods, each a copy carrying its kept status: what the agent's API lists.
func (v *View) Pods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range v.pods.GetPods() {
		out = append(out, v.withStatus(p))
	}
	return out
}

// Pod is one desired pod by namespace and name, a copy carrying its kept status.
func (v *View) Pod(namespace, name string) (*v1.Pod, bool) {
	p, ok := v.pods.GetPodByFullName(kubecontainer.BuildPodFullName(name, namespace))
	if !ok {
		return nil, false
	}
	return v.withStatus(p), true
}

// withStatus copies p, which its owner may change, and gives it the status kept for it (a pod
// whose worker has not yet written one keeps the status it came with).
func (v *View) withStatus(p *v1.Pod) *v1.Pod {
	p = p.DeepCopy()
	if s, ok := v.statuses.GetPodStatus(p.UID); ok {
		p.Status = s
	}
	return p
}

// SourcesReady reports whether every source configured has delivered its first set since the
// start: until then a pod not yet announced again may still be wanted.
func (v *View) SourcesReady() bool { return v.sources.SeenAllSources(v.names) }

// ActivePods are the desired pods not being stopped already, nor finished: those that hold the
// node's resources and may be evicted.
func (v *View) ActivePods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range v.pods.GetPods() {
		if v.phases.IsPodTerminationRequested(p.UID) || !v.phases.Known(p.UID) {
			continue
		}
		if s, ok := v.statuses.GetPodStatus(p.UID); ok && (s.Phase == v1.PodFailed || s.Phase == v1.PodSucceeded) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// AllocatedPods are the active pods as allocated: the eviction manager ranks pods by what they
// hold, not by a resize they have not been granted.
func (v *View) AllocatedPods() []*v1.Pod {
	if v.allocs == nil {
		return v.ActivePods()
	}
	return v.allocs.AllocatedPods(v.ActivePods())
}

// IsPodKnownFinished reports whether the pod's worker is done with it.
func (v *View) IsPodKnownFinished(uid types.UID) bool { return v.phases.IsPodKnownFinished(uid) }

// CouldHaveRunningContainers reports whether the pod's containers may still run.
func (v *View) CouldHaveRunningContainers(uid types.UID) bool {
	return v.phases.CouldHaveRunningContainers(uid)
}

// HoldsCPUs: a source lists the pod and its worker has not finished it, or its containers may
// still run (a pod being killed keeps its CPUs until its containers are gone). Asking the sources
// rather than the pods admitted so far matters at a restart, when the pods of the first batch
// are admitted one by one and the later ones must not lose their CPUs to the earlier ones.
func (v *View) HoldsCPUs(uid string) bool {
	id := types.UID(uid)
	if v.phases.CouldHaveRunningContainers(id) {
		return true
	}
	return v.sources.Has(id) && !v.phases.IsPodKnownFinished(id)
}

// PodCleanedUp reports whether the pod's worker is done with it: containers stopped and, for a
// pod that stays (evicted, not deleted), its memory volumes unmounted.
func (v *View) PodCleanedUp(uid types.UID) bool {
	return !v.phases.Known(uid) || v.phases.IsPodKnownFinished(uid)
}

// Gone reports a pod deleted for good: gone from the sources (once all have spoken) and with no
// container that could still run. Only then may what it left be collected.
func (v *View) Gone(uid types.UID) bool {
	if !v.SourcesReady() {
		return false
	}
	if _, ok := v.pods.GetPodByUID(uid); ok {
		return false
	}
	return !v.phases.CouldHaveRunningContainers(uid)
}
