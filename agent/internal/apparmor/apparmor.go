// Package apparmor resolves a container's AppArmor profile from a pod (its fields and the
// deprecated per-container annotations) the kubelet's way, and tells whether this host's kernel
// enforces AppArmor. Admission and the runtime manager share it, so the profile a pod is admitted
// with is the one its containers are sent.
package apparmor

import (
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/internal/regularfile"
)

// Enabled reports whether the kernel enforces AppArmor: its securityfs folder is there and the
// module says it is enabled (the kubelet's test).
func Enabled() bool {
	if _, err := os.Stat("/sys/kernel/security/apparmor"); err != nil {
		return false
	}
	b, err := regularfile.Read("/sys/module/apparmor/parameters/enabled", 64)
	return err == nil && len(b) > 1 && b[0] == 'Y'
}

// Profile is the container's AppArmor profile: its own field, then its deprecated annotation
// (a static pod's annotations were never copied into its fields by an apiserver), then the pod's
// field. Nil leaves the choice to the runtime.
func Profile(pod *v1.Pod, c *v1.Container) *v1.AppArmorProfile {
	if c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil {
		return c.SecurityContext.AppArmorProfile
	}
	if p := fromAnnotation(pod.Annotations, c.Name); p != nil {
		return p
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		return psc.AppArmorProfile
	}
	return nil
}

// fromAnnotation reads container.apparmor.security.beta.kubernetes.io/<name>; a value of no known
// form gives nil, as in the kubelet (the apiserver and static pod validation refuse it).
func fromAnnotation(annotations map[string]string, container string) *v1.AppArmorProfile {
	v, ok := annotations[v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+container]
	if !ok {
		return nil
	}
	switch {
	case v == v1.DeprecatedAppArmorBetaProfileRuntimeDefault:
		return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}
	case v == v1.DeprecatedAppArmorBetaProfileNameUnconfined:
		return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}
	case strings.HasPrefix(v, v1.DeprecatedAppArmorBetaProfileNamePrefix):
		name := strings.TrimPrefix(v, v1.DeprecatedAppArmorBetaProfileNamePrefix)
		return &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: &name}
	}
	return nil
}

// Required reports whether any field or deprecated annotation of the pod asks for a profile other
// than unconfined. An annotation whose value names no known profile counts, as in the kubelet.
func Required(pod *v1.Pod) bool {
	if psc := pod.Spec.SecurityContext; psc != nil && psc.AppArmorProfile != nil &&
		psc.AppArmorProfile.Type != v1.AppArmorProfileTypeUnconfined {
		return true
	}
	for _, c := range Containers(pod) {
		if sc := c.SecurityContext; sc != nil && sc.AppArmorProfile != nil && sc.AppArmorProfile.Type != v1.AppArmorProfileTypeUnconfined {
			return true
		}
	}
	for k, v := range pod.Annotations {
		if strings.HasPrefix(k, v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix) && v != v1.DeprecatedAppArmorBetaProfileNameUnconfined {
			return true
		}
	}
	return false
}

// Containers are the pod's init, app and ephemeral containers.
func Containers(pod *v1.Pod) []*v1.Container {
	out := make([]*v1.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers)+len(pod.Spec.EphemeralContainers))
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	for i := range pod.Spec.EphemeralContainers {
		c := v1.Container(pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		out = append(out, &c)
	}
	return out
}
