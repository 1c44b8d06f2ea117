// Package admission decides, before a new pod's worker starts, whether the pod can run on this node
// at all: the kubelet's ordered admit handlers (Chain) — the node's pressure, sysctls, the pod
// limit, the general predicates (pkg/kubelet/lifecycle/predicate.go, Handler here), AppArmor,
// resource claims and the CPU manager. The scheduler already ran the predicates, but a pod can
// still arrive that fails them — a race between two bindings, a pod created with spec.nodeName
// set, a static pod — and running it anyway would overcommit the node or break the placement its
// author asked for. A rejected pod ends Failed with the reason and message of the first failed
// check, as the kubelet reports it.
package admission

import (
	"fmt"
	goruntime "runtime"

	v1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/nodelet/nodelet/agent/podmanager"
)

// Reasons a pod is rejected with, spelled as the kubelet spells them (they land in the pod status,
// where users and tools match on them). Resource shortfalls use "OutOf" + the resource name.
const (
	InvalidNodeInfo                    = "InvalidNodeInfo"
	PodOSSelectorNodeLabelDoesNotMatch = "PodOSSelectorNodeLabelDoesNotMatch"
	PodOSNotSupported                  = "PodOSNotSupported"
	UnexpectedAdmissionError           = "UnexpectedAdmissionError"

	NodeAffinity    = "NodeAffinity"
	NodeName        = "NodeName"
	NodePorts       = "NodePorts"
	TaintToleration = "TaintToleration"

	OutOfPrefix = "OutOf"
)

// What each failed scheduler predicate says; the status message is "Predicate <name> failed: <this>".
const (
	nodeAffinityDesc = "node(s) didn't match Pod's node affinity/selector"
	nodeNameDesc     = "node(s) didn't match the requested node name"
	nodePortsDesc    = "node(s) didn't have free ports for the requested pod ports"
	taintDesc        = "node(s) had taints that the pod didn't tolerate"
)

// systemCriticalPriority is the priority of system-cluster-critical; pods at or above it (and every
// static or mirror pod) are critical, and a shortage of resources alone never rejects them.
const systemCriticalPriority int32 = 2_000_000_000

// Result is an admission decision; Reason and Message are set when Admit is false.
type Result struct {
	Admit   bool
	Reason  string
	Message string
}

// NodeFunc returns the Node the pod is checked against: in a cluster the registered Node (its
// labels and taints may have been changed by others), standalone one built from the local labels.
type NodeFunc func() (*v1.Node, error)

// AllocatableFunc returns what pods may request on this node in total.
type AllocatableFunc func() v1.ResourceList

// PreemptFunc frees resources for a critical pod that does not fit, as the kubelet's critical pod
// admission handler does by evicting lower-priority pods. An error rejects the pod.
type PreemptFunc func(pod *v1.Pod, short []InsufficientResource) error

// Handler is the predicate admit handler.
type Handler struct {
	node        NodeFunc
	allocatable AllocatableFunc
	// Preempt, when nil, admits a critical pod that only lacks resources without evicting anyone:
	// nodelet has no eviction manager yet, and refusing a node's own static pods would be worse
	// than overcommitting.
	Preempt PreemptFunc
}

// New returns a handler checking pods against node() and allocatable().
func New(node NodeFunc, allocatable AllocatableFunc) *Handler {
	return &Handler{node: node, allocatable: allocatable}
}

// failure is one failed check, before it becomes a Result.
type failure struct {
	predicate, desc string
	short           *InsufficientResource
}

func (f failure) result() Result {
	if f.short != nil {
		return Result{Reason: OutOfPrefix + string(f.short.Name), Message: f.short.Error()}
	}
	return Result{Reason: f.predicate, Message: fmt.Sprintf("Predicate %s failed: %s", f.predicate, f.desc)}
}

// Admit decides whether pod may run beside others, the pods already admitted on this node. Pods
// in others that are pod itself, finished, or mirror pods take no share of the node.
func (h *Handler) Admit(pod *v1.Pod, others []*v1.Pod) Result {
	node, err := h.node()
	if err != nil || node == nil {
		return Result{Reason: InvalidNodeInfo, Message: "Kubelet cannot get node info."}
	}
	// The checks no eviction could fix come first, as in the kubelet.
	if osSelectorMismatch(pod) {
		return Result{Reason: PodOSSelectorNodeLabelDoesNotMatch,
			Message: "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label"}
	}
	if pod.Spec.OS != nil && string(pod.Spec.OS.Name) != goruntime.GOOS {
		return Result{Reason: PodOSNotSupported, Message: "Failed to admit pod as the OS field doesn't match node OS"}
	}
	if r, refused := unsupportedFields(pod); refused {
		return r
	}

	active := activeOthers(pod, others)
	fails := h.generalPredicates(pod, node, active)
	if len(fails) == 0 {
		return Result{Admit: true}
	}
	if isCritical(pod) {
		var short []InsufficientResource
		var rest []failure
		for _, f := range fails {
			if f.short != nil {
				short = append(short, *f.short)
			} else {
				rest = append(rest, f)
			}
		}
		if len(rest) == 0 {
			if h.Preempt != nil {
				if err := h.Preempt(pod, short); err != nil {
					return Result{Reason: UnexpectedAdmissionError,
						Message: fmt.Sprintf("Unexpected error while attempting to recover from admission failure: %v", err)}
				}
			}
			return Result{Admit: true}
		}
		fails = rest
	}
	return fails[0].result()
}

// generalPredicates runs every check and returns all failures in the kubelet's order: resources,
// node affinity, node name, host ports, NoExecute taints.
func (h *Handler) generalPredicates(pod *v1.Pod, node *v1.Node, active []*v1.Pod) []failure {
	var fails []failure
	for _, s := range fitsResources(pod, active, h.allocatable()) {
		fails = append(fails, failure{short: &s})
	}
	// A selector that does not parse matches nothing, as in the scheduler.
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok {
		fails = append(fails, failure{predicate: NodeAffinity, desc: nodeAffinityDesc})
	}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != node.Name {
		fails = append(fails, failure{predicate: NodeName, desc: nodeNameDesc})
	}
	if !fitsPorts(pod, active) {
		fails = append(fails, failure{predicate: NodePorts, desc: nodePortsDesc})
	}
	// NoSchedule and PreferNoSchedule were the scheduler's business and do not stop a pod already
	// bound here; NoExecute would evict it at once. Static pods are the node's own and exempt.
	if !podmanager.IsStaticPod(pod) {
		// Comparison operators in tolerations are an alpha feature, off by default.
		if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints,
			pod.Spec.Tolerations, func(t *v1.Taint) bool { return t.Effect == v1.TaintEffectNoExecute }, false); untolerated {
			fails = append(fails, failure{predicate: TaintToleration, desc: taintDesc})
		}
	}
	return fails
}

// osSelectorMismatch reports a pod whose kubernetes.io/os label names another OS than this
// machine's. The kubelet compares with the Node's label but first overwrites a missing or stale one
// with its own OS, so the machine's OS is what counts.
func osSelectorMismatch(pod *v1.Pod) bool {
	want, ok := pod.Labels[v1.LabelOSStable]
	return ok && want != goruntime.GOOS
}

func isCritical(pod *v1.Pod) bool {
	if podmanager.IsStaticPod(pod) || podmanager.IsMirrorPod(pod) {
		return true
	}
	return pod.Spec.Priority != nil && *pod.Spec.Priority >= systemCriticalPriority
}

// activeOthers drops what holds no resources or ports: the pod itself (a re-admission), pods that
// reached a terminal phase, and mirror pods (their static pod is counted instead).
func activeOthers(pod *v1.Pod, others []*v1.Pod) []*v1.Pod {
	out := make([]*v1.Pod, 0, len(others))
	for _, p := range others {
		if p == nil || p.UID == pod.UID || podmanager.IsMirrorPod(p) ||
			p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
			continue
		}
		out = append(out, p)
	}
	return out
}
