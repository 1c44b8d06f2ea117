package eviction

import (
	"sort"

	"k8s.io/apimachinery/pkg/types"

	v1 "k8s.io/api/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/podmanager"
)

// systemCriticalPriority is the kubelet's scheduling.SystemCriticalPriority: pods at or above it
// (system-cluster-critical, system-node-critical) are never evicted.
const systemCriticalPriority = 2000000000

// IsCriticalPod is the kubelet's rule: static pods (which could not come back once evicted), mirror
// pods, and pods of system-critical priority.
func IsCriticalPod(pod *v1.Pod) bool {
	if podmanager.IsStaticPod(pod) {
		return true
	}
	if _, ok := pod.Annotations["kubernetes.io/config.mirror"]; ok {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority
}

// cmpFunc orders two pods: negative puts a first.
type cmpFunc func(a, b *v1.Pod) int

// Rank sorts pods into the order the kubelet evicts them for signal s: for memory, pods using more
// than they requested first, then lower priority, then the most usage above requests; for disk the
// same with ephemeral storage; for pids, lower priority, then the most processes.
func Rank(s Signal, pods []*v1.Pod, usage map[types.UID]PodUsage) {
	var by []cmpFunc
	switch conditionOf(s) {
	case v1.NodeMemoryPressure:
		over := func(p *v1.Pod) int64 { return usage[p.UID].Memory - requests(p, v1.ResourceMemory) }
		by = []cmpFunc{exceeds(over), priority, more(over)}
	case v1.NodeDiskPressure:
		over := func(p *v1.Pod) int64 {
			return usage[p.UID].Disk - requests(p, v1.ResourceEphemeralStorage)
		}
		by = []cmpFunc{exceeds(over), priority, more(over)}
	default:
		by = []cmpFunc{priority, more(func(p *v1.Pod) int64 { return usage[p.UID].Processes })}
	}
	sort.SliceStable(pods, func(i, j int) bool {
		for _, f := range by {
			if c := f(pods[i], pods[j]); c != 0 {
				return c < 0
			}
		}
		return false
	})
}

// exceeds puts pods whose usage is above their requests first.
func exceeds(over func(*v1.Pod) int64) cmpFunc {
	return func(a, b *v1.Pod) int {
		ea, eb := over(a) > 0, over(b) > 0
		switch {
		case ea == eb:
			return 0
		case ea:
			return -1
		}
		return 1
	}
}

// more puts the larger value first.
func more(v func(*v1.Pod) int64) cmpFunc {
	return func(a, b *v1.Pod) int {
		va, vb := v(a), v(b)
		switch {
		case va > vb:
			return -1
		case va < vb:
			return 1
		}
		return 0
	}
}

// priority puts lower priority first; a pod without one counts as 0.
func priority(a, b *v1.Pod) int {
	pa, pb := int32(0), int32(0)
	if a.Spec.Priority != nil {
		pa = *a.Spec.Priority
	}
	if b.Spec.Priority != nil {
		pb = *b.Spec.Priority
	}
	switch {
	case pa < pb:
		return -1
	case pa > pb:
		return 1
	}
	return 0
}

// requests is the pod's request for r as the kubelet's eviction ranks it: its containers' requests
// plus the RuntimeClass overhead only when they request some. A pod requesting nothing stays at
// zero, so a sandboxed BestEffort pod is not shielded from eviction by its runtime's overhead.
func requests(p *v1.Pod, r v1.ResourceName) int64 {
	q := resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{ExcludeOverhead: true})[r]
	if o, ok := p.Spec.Overhead[r]; ok && !q.IsZero() {
		q.Add(o)
	}
	return q.Value()
}

// Admit decides whether a new pod may start given the pressure the node is under, as the kubelet:
// any pressure refuses all but critical pods, except that memory pressure alone only refuses
// BestEffort pods that do not tolerate it. It returns the rejection message, or "" to admit.
func (m *Manager) Admit(pod *v1.Pod) (reason, message string) {
	m.mu.Lock()
	var conds []v1.NodeConditionType
	for _, c := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		if m.conditions[c] {
			conds = append(conds, c)
		}
	}
	m.mu.Unlock()
	if len(conds) == 0 || IsCriticalPod(pod) {
		return "", ""
	}
	if len(conds) == 1 && conds[0] == v1.NodeMemoryPressure {
		if kubecontainer.PodQOSClass(pod) != v1.PodQOSBestEffort || toleratesMemoryPressure(pod) {
			return "", ""
		}
	}
	return ReasonEvicted, fmtConditions(conds)
}

func fmtConditions(c []v1.NodeConditionType) string {
	s := "["
	for i, t := range c {
		if i > 0 {
			s += " "
		}
		s += string(t)
	}
	return "The node had condition: " + s + "]. "
}

func toleratesMemoryPressure(pod *v1.Pod) bool {
	for _, t := range pod.Spec.Tolerations {
		if t.Effect != "" && t.Effect != v1.TaintEffectNoSchedule {
			continue
		}
		if t.Key == "" && t.Operator == v1.TolerationOpExists {
			return true
		}
		// The taint has no value: Equal matches only an empty one.
		if t.Key == v1.TaintNodeMemoryPressure && (t.Operator == v1.TolerationOpExists || t.Value == "") {
			return true
		}
	}
	return false
}
