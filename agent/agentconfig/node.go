package agentconfig

import (
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// parseTaints reads the kubelet's --register-with-taints spelling: key=value:Effect or key:Effect.
func parseTaints(specs []string) ([]v1.Taint, error) {
	var out []v1.Taint
	for _, spec := range specs {
		kv, effect, ok := strings.Cut(spec, ":")
		if !ok {
			return nil, fmt.Errorf("--register-with-taints %q: want key=value:Effect", spec)
		}
		key, value, _ := strings.Cut(kv, "=")
		out = append(out, v1.Taint{Key: key, Value: value, Effect: v1.TaintEffect(effect)})
	}
	return out, nil
}

func checkTaints(taints []v1.Taint) error {
	var errs []error
	for _, t := range taints {
		if msgs := validation.IsQualifiedName(t.Key); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("taint key %q: %s", t.Key, strings.Join(msgs, "; ")))
		}
		if msgs := validation.IsValidLabelValue(t.Value); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("taint %s value %q: %s", t.Key, t.Value, strings.Join(msgs, "; ")))
		}
		switch t.Effect {
		case v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			errs = append(errs, fmt.Errorf("taint %s effect %q: want NoSchedule, PreferNoSchedule or NoExecute", t.Key, t.Effect))
		}
	}
	return errors.Join(errs...)
}

// kubeletLabel tells the kubernetes.io labels a node may set on itself (the NodeRestriction admission
// plugin refuses others); kubelet.kubernetes.io/ and node.kubernetes.io/ keys are its own too.
func kubeletLabel(key string) bool {
	switch key {
	case "kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch",
		"beta.kubernetes.io/os", "beta.kubernetes.io/arch", "beta.kubernetes.io/instance-type",
		"node.kubernetes.io/instance-type",
		"topology.kubernetes.io/region", "topology.kubernetes.io/zone",
		"failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone":
		return true
	}
	return false
}

// checkNodeLabels refuses what the apiserver would refuse at registration, before the agent starts.
func checkNodeLabels(labels map[string]string) error {
	var errs []error
	for k, v := range labels {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("node label %q: %s", k, strings.Join(msgs, "; ")))
			continue
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("node label %s value %q: %s", k, v, strings.Join(msgs, "; ")))
		}
		prefix, _, ok := strings.Cut(k, "/")
		if !ok || kubeletLabel(k) || strings.HasPrefix(k, "kubelet.kubernetes.io/") || strings.HasPrefix(k, "node.kubernetes.io/") {
			continue
		}
		if prefix == "kubernetes.io" || prefix == "k8s.io" || strings.HasSuffix(prefix, ".kubernetes.io") || strings.HasSuffix(prefix, ".k8s.io") {
			errs = append(errs, fmt.Errorf("node label %q: a node may not set labels in the kubernetes.io or k8s.io namespaces other than %s",
				k, "kubelet.kubernetes.io/*, node.kubernetes.io/* and the well-known topology, os and arch labels"))
		}
	}
	return errors.Join(errs...)
}
