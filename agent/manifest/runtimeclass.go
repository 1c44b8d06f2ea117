package manifest

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/agent/podvalidation"
)

// ErrPodRejected: a pod refused by the RuntimeClass admission the folder stands in for; the message
// after it is the API server's plugin's.
var ErrPodRejected = errors.New("pod rejected")

// ErrInvalidRuntimeClass: a RuntimeClass the API server would refuse to create.
var ErrInvalidRuntimeClass = errors.New("invalid RuntimeClass")

func decodeRuntimeClass(doc []byte, apiVersion string) (*nodev1.RuntimeClass, error) {
	if apiVersion != nodev1.SchemeGroupVersion.String() {
		return nil, fmt.Errorf("RuntimeClass apiVersion %q, want %s", apiVersion, nodev1.SchemeGroupVersion)
	}
	rc := &nodev1.RuntimeClass{}
	if err := yaml.Unmarshal(doc, rc); err != nil {
		return nil, err
	}
	if errs := podvalidation.ValidateRuntimeClass(rc); len(errs) > 0 {
		return nil, fmt.Errorf("%w %q: %w", ErrInvalidRuntimeClass, rc.Name, errs.ToAggregate())
	}
	return rc, nil
}

// RuntimeClasses are the RuntimeClass objects of a standalone agent's manifest folder, by name. When
// there are none, a pod's runtimeClassName is taken as the runtime handler itself (runtimeClassName:
// runsc works on `nodelet up` without writing an object); once the folder holds one, a pod may only
// name those, as in a cluster.
type RuntimeClasses map[string]*nodev1.RuntimeClass

// Admit does to a decoded pod what the API server's RuntimeClass admission plugin does to a created
// one: it sets the pod's overhead from its RuntimeClass (refusing a different one the pod already
// sets, or an overhead without a RuntimeClass defining one), merges the RuntimeClass's node selector
// into the pod's (refusing a conflicting value) and adds its tolerations. Admitted before the pod is
// defaulted, the RuntimeClass's effect is part of the content its UID is derived from, so a changed
// RuntimeClass makes a new pod rather than changing a running one's overhead under it.
func (r RuntimeClasses) Admit(pod *v1.Pod) error {
	var rc *nodev1.RuntimeClass
	if name := pod.Spec.RuntimeClassName; name != nil && len(r) > 0 {
		if rc = r[*name]; rc == nil {
			return fmt.Errorf("%w: RuntimeClass %q not found", ErrPodRejected, *name)
		}
	}
	if rc != nil && rc.Overhead != nil {
		if len(pod.Spec.Overhead) > 0 && !apiequality.Semantic.DeepEqual(rc.Overhead.PodFixed, pod.Spec.Overhead) {
			return fmt.Errorf("%w: Pod's Overhead doesn't match RuntimeClass's defined Overhead", ErrPodRejected)
		}
		pod.Spec.Overhead = rc.Overhead.PodFixed.DeepCopy()
	} else if pod.Spec.Overhead != nil {
		return fmt.Errorf("%w: Pod Overhead set without corresponding RuntimeClass defined Overhead", ErrPodRejected)
	}
	if rc == nil || rc.Scheduling == nil {
		return nil
	}
	for k, v := range rc.Scheduling.NodeSelector {
		if pv, ok := pod.Spec.NodeSelector[k]; ok && pv != v {
			return fmt.Errorf("%w: conflict: runtimeClass.scheduling.nodeSelector[%s] = %s; pod.spec.nodeSelector[%s] = %s",
				ErrPodRejected, k, v, k, pv)
		}
		if pod.Spec.NodeSelector == nil {
			pod.Spec.NodeSelector = map[string]string{}
		}
		pod.Spec.NodeSelector[k] = v
	}
	pod.Spec.Tolerations = mergeTolerations(pod.Spec.Tolerations, rc.Scheduling.Tolerations)
	return nil
}

// Handler is the CRI runtime handler for runtimeClassName: its RuntimeClass's, or the name itself
// when the folder defines none. A name the folder does not define is NotFound, as from the apiserver.
func (r RuntimeClasses) Handler(name string) (string, error) {
	if len(r) == 0 {
		return name, nil
	}
	rc, ok := r[name]
	if !ok {
		return "", apierrors.NewNotFound(nodev1.Resource("runtimeclasses"), name)
	}
	return rc.Handler, nil
}

// mergeTolerations appends the RuntimeClass's tolerations to the pod's, leaving out each toleration
// another one in the list already covers (of two equal ones, the first stays), as the plugin merges.
func mergeTolerations(pod, rc []v1.Toleration) []v1.Toleration {
	all := append(append([]v1.Toleration(nil), pod...), rc...)
	var out []v1.Toleration
	for i, t := range all {
		redundant := false
		for _, kept := range out {
			if covers(kept, t) {
				redundant = true
				break
			}
		}
		for _, later := range all[i+1:] {
			if redundant {
				break
			}
			redundant = !apiequality.Semantic.DeepEqual(t, later) && covers(later, t)
		}
		if !redundant {
			out = append(out, t)
		}
	}
	return out
}

// covers reports whether every taint t tolerates is tolerated by wide as well.
func covers(wide, t v1.Toleration) bool {
	if apiequality.Semantic.DeepEqual(wide, t) {
		return true
	}
	// Only an empty key with Exists matches every key.
	if t.Key != wide.Key && (wide.Key != "" || wide.Operator != v1.TolerationOpExists) {
		return false
	}
	if wide.Effect != "" && t.Effect != wide.Effect {
		return false
	}
	// A NoExecute toleration with a time limit covers only ones that leave at least as early.
	if wide.Effect == v1.TaintEffectNoExecute && wide.TolerationSeconds != nil &&
		(t.TolerationSeconds == nil || *t.TolerationSeconds > *wide.TolerationSeconds) {
		return false
	}
	switch wide.Operator {
	case v1.TolerationOpExists:
		return true
	case v1.TolerationOpEqual, "":
		return t.Operator == v1.TolerationOpEqual && t.Value == wide.Value
	}
	return false
}
