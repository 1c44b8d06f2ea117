package kubecontainer

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// ResolveRecursiveReadOnly decides whether a volume mount is made read-only recursively (its
// submounts too), from its recursiveReadOnly and whether the pod's runtime handler can do so, with
// the kubelet's rules and messages: Disabled (or unset) never; IfPossible when the handler can;
// Enabled when the handler can, an error otherwise. Either needs a read-only mount without
// propagation, since a submount propagated in later would escape it.
func ResolveRecursiveReadOnly(m v1.VolumeMount, runtimeSupportsRRO bool) (bool, error) {
	if m.RecursiveReadOnly == nil || *m.RecursiveReadOnly == v1.RecursiveReadOnlyDisabled {
		return false, nil
	}
	if !m.ReadOnly {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not read-only", m.Name)
	}
	if m.MountPropagation != nil && *m.MountPropagation != v1.MountPropagationNone {
		return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not compatible with propagation %q",
			m.Name, *m.MountPropagation)
	}
	switch mode := *m.RecursiveReadOnly; mode {
	case v1.RecursiveReadOnlyIfPossible:
		return runtimeSupportsRRO, nil
	case v1.RecursiveReadOnlyEnabled:
		if !runtimeSupportsRRO {
			return false, fmt.Errorf("volume %q requested recursive read-only mode, but it is not supported by the runtime", m.Name)
		}
		return true, nil
	default:
		return false, fmt.Errorf("unknown recursive read-only mode %q", mode)
	}
}

// WantsRecursiveReadOnly reports whether resolving m needs to know the handler's support at all.
func WantsRecursiveReadOnly(m v1.VolumeMount) bool {
	return m.ReadOnly && m.RecursiveReadOnly != nil && *m.RecursiveReadOnly != v1.RecursiveReadOnlyDisabled
}
