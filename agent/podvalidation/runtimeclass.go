package podvalidation

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ValidateRuntimeClass checks a RuntimeClass read from the manifest folder as the API server checks a
// created one: its name, a handler that is a DNS label (runtimes name their handlers so, and it is
// sent as is in RunPodSandbox), an overhead of valid, non-negative quantities, and a scheduling of
// valid labels and tolerations, none given twice (the list is merged into pods' tolerations).
func ValidateRuntimeClass(rc *nodev1.RuntimeClass) field.ErrorList {
	errs := apivalidation.ValidateObjectMeta(&rc.ObjectMeta, false, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	for _, msg := range apivalidation.NameIsDNSLabel(rc.Handler, false) {
		errs = append(errs, field.Invalid(field.NewPath("handler"), rc.Handler, msg))
	}
	if rc.Overhead != nil {
		errs = append(errs, validateResources(&v1.ResourceRequirements{Limits: rc.Overhead.PodFixed}, field.NewPath("overhead"))...)
	}
	if s := rc.Scheduling; s != nil {
		fld := field.NewPath("scheduling")
		errs = append(errs, metav1validation.ValidateLabels(s.NodeSelector, fld.Child("nodeSelector"))...)
		errs = append(errs, ValidateTolerations(s.Tolerations, fld.Child("tolerations"))...)
		type listKey struct {
			key, value string
			op         v1.TolerationOperator
			effect     v1.TaintEffect
		}
		seen := map[listKey]bool{}
		for i, t := range s.Tolerations {
			k := listKey{t.Key, t.Value, t.Operator, t.Effect}
			if seen[k] {
				errs = append(errs, field.Duplicate(fld.Child("tolerations").Index(i), t))
			}
			seen[k] = true
		}
	}
	return errs
}

// ValidateTolerations checks tolerations as the API server does: a key that is a label name (or
// none, with Exists, to tolerate every taint), a known operator and effect, no value with Exists,
// and tolerationSeconds only for NoExecute.
func ValidateTolerations(ts []v1.Toleration, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range ts {
		f := fld.Index(i)
		if t.Key != "" {
			errs = append(errs, metav1validation.ValidateLabelName(t.Key, f.Child("key"))...)
		} else if t.Operator != v1.TolerationOpExists {
			errs = append(errs, field.Invalid(f.Child("operator"), t.Operator, "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != v1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(f.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case v1.TolerationOpEqual, "":
			if msgs := validation.IsValidLabelValue(t.Value); len(msgs) > 0 {
				errs = append(errs, field.Invalid(f.Child("operator"), t.Value, strings.Join(msgs, ";")))
			}
		case v1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(f.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, field.NotSupported(f.Child("operator"), t.Operator, []v1.TolerationOperator{v1.TolerationOpEqual, v1.TolerationOpExists}))
		}
		switch t.Effect {
		case "", v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute:
		default:
			errs = append(errs, field.NotSupported(f.Child("effect"), t.Effect,
				[]v1.TaintEffect{v1.TaintEffectNoSchedule, v1.TaintEffectPreferNoSchedule, v1.TaintEffectNoExecute}))
		}
	}
	return errs
}
