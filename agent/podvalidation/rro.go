package podvalidation

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateRecursiveReadOnly is the apiserver's rule for volumeMounts[].recursiveReadOnly: one of
// the three modes, and IfPossible or Enabled only on a read-only mount without propagation.
func validateRecursiveReadOnly(m *v1.VolumeMount, fld *field.Path) field.ErrorList {
	if m.RecursiveReadOnly == nil {
		return nil
	}
	var errs field.ErrorList
	switch *m.RecursiveReadOnly {
	case v1.RecursiveReadOnlyDisabled:
	case v1.RecursiveReadOnlyEnabled, v1.RecursiveReadOnlyIfPossible:
		if !m.ReadOnly {
			errs = append(errs, field.Forbidden(fld, "may only be specified when readOnly is true"))
		}
		if m.MountPropagation != nil && *m.MountPropagation != v1.MountPropagationNone {
			errs = append(errs, field.Forbidden(fld, "may only be specified when mountPropagation is None or not specified"))
		}
	default:
		errs = append(errs, field.NotSupported(fld, *m.RecursiveReadOnly, []v1.RecursiveReadOnlyMode{
			v1.RecursiveReadOnlyDisabled, v1.RecursiveReadOnlyEnabled, v1.RecursiveReadOnlyIfPossible}))
	}
	return errs
}
