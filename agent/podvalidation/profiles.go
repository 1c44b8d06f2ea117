package podvalidation

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxAppArmorProfileLength is the API server's bound on a Localhost AppArmor profile name
// (PATH_MAX - 1).
const maxAppArmorProfileLength = 4095

// validateSeccompProfile checks a seccompProfile field: a Localhost profile's name becomes a path
// under the agent's root dir, so it must descend from there.
func validateSeccompProfile(sp *v1.SeccompProfile, fld *field.Path) field.ErrorList {
	if sp == nil {
		return nil
	}
	var errs field.ErrorList
	switch sp.Type {
	case v1.SeccompProfileTypeLocalhost, v1.SeccompProfileTypeRuntimeDefault, v1.SeccompProfileTypeUnconfined:
	case "":
		errs = append(errs, field.Required(fld.Child("type"), "type is required when seccompProfile is set"))
	default:
		errs = append(errs, field.NotSupported(fld.Child("type"), sp.Type, []v1.SeccompProfileType{
			v1.SeccompProfileTypeLocalhost, v1.SeccompProfileTypeRuntimeDefault, v1.SeccompProfileTypeUnconfined}))
	}
	switch {
	case sp.Type == v1.SeccompProfileTypeLocalhost && sp.LocalhostProfile == nil:
		errs = append(errs, field.Required(fld.Child("localhostProfile"), "must be set when seccomp type is Localhost"))
	case sp.Type == v1.SeccompProfileTypeLocalhost:
		errs = append(errs, validateLocalDescendingPath(*sp.LocalhostProfile, fld.Child("localhostProfile"))...)
	case sp.LocalhostProfile != nil:
		errs = append(errs, field.Invalid(fld.Child("localhostProfile"), sp, "can only be set when seccomp type is Localhost"))
	}
	return errs
}

// validateAppArmorProfile checks an appArmorProfile field as the API server does.
func validateAppArmorProfile(p *v1.AppArmorProfile, fld *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	var errs field.ErrorList
	switch p.Type {
	case v1.AppArmorProfileTypeLocalhost:
		lp := fld.Child("localhostProfile")
		switch {
		case p.LocalhostProfile == nil:
			errs = append(errs, field.Required(lp, "must be set when AppArmor type is Localhost"))
		case strings.TrimSpace(*p.LocalhostProfile) != *p.LocalhostProfile:
			errs = append(errs, field.Invalid(lp, *p.LocalhostProfile, "must not be padded with whitespace"))
		case *p.LocalhostProfile == "":
			errs = append(errs, field.Required(lp, "must be set when AppArmor type is Localhost"))
		}
		if p.LocalhostProfile != nil && len(*p.LocalhostProfile) > maxAppArmorProfileLength {
			errs = append(errs, field.TooLong(lp, "", maxAppArmorProfileLength))
		}
	case v1.AppArmorProfileTypeRuntimeDefault, v1.AppArmorProfileTypeUnconfined:
		if p.LocalhostProfile != nil {
			errs = append(errs, field.Invalid(fld.Child("localhostProfile"), p.LocalhostProfile, "can only be set when AppArmor type is Localhost"))
		}
	case "":
		errs = append(errs, field.Required(fld.Child("type"), "type is required when appArmorProfile is set"))
	default:
		errs = append(errs, field.NotSupported(fld.Child("type"), p.Type, []v1.AppArmorProfileType{
			v1.AppArmorProfileTypeLocalhost, v1.AppArmorProfileTypeRuntimeDefault, v1.AppArmorProfileTypeUnconfined}))
	}
	return errs
}

func validateSELinuxChangePolicy(p *v1.PodSELinuxChangePolicy, fld *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	switch *p {
	case v1.SELinuxChangePolicyMountOption, v1.SELinuxChangePolicyRecursive:
		return nil
	}
	return field.ErrorList{field.NotSupported(fld, *p, []v1.PodSELinuxChangePolicy{
		v1.SELinuxChangePolicyMountOption, v1.SELinuxChangePolicyRecursive})}
}

// validateProcMounts refuses procMount Unmasked in a pod that shares the host's user namespace:
// an unmasked /proc there would hand the container the host's kernel interfaces. The API server
// allows it only with hostUsers: false.
func validateProcMounts(spec *v1.PodSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range spec.InitContainers {
		errs = append(errs, validateProcMount(spec, &spec.InitContainers[i], fld.Child("initContainers").Index(i))...)
	}
	for i := range spec.Containers {
		errs = append(errs, validateProcMount(spec, &spec.Containers[i], fld.Child("containers").Index(i))...)
	}
	return errs
}

func validateProcMount(spec *v1.PodSpec, c *v1.Container, fld *field.Path) field.ErrorList {
	hostUsers := spec.HostUsers == nil || *spec.HostUsers
	if sc := c.SecurityContext; hostUsers && sc != nil && sc.ProcMount != nil && *sc.ProcMount == v1.UnmaskedProcMount {
		return field.ErrorList{field.Invalid(fld.Child("securityContext", "procMount"), sc.ProcMount,
			"`hostUsers` must be false to use `Unmasked`")}
	}
	return nil
}

// validateProfileAnnotations checks the deprecated seccomp and AppArmor annotations as the API
// server does on create: their values well formed, an AppArmor one naming a container of the pod,
// and each agreeing with the field that is also set. (The seccomp ones do nothing since v1.27,
// in the kubelet as here; the AppArmor ones still apply to their container.)
func validateProfileAnnotations(pod *v1.Pod) field.ErrorList {
	fld := field.NewPath("metadata", "annotations")
	var errs field.ErrorList
	names := map[string]bool{}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			names[c.Name] = true
		}
	}
	for k, v := range pod.Annotations {
		switch {
		case k == v1.SeccompPodAnnotationKey || strings.HasPrefix(k, v1.SeccompContainerAnnotationKeyPrefix):
			errs = append(errs, validateSeccompAnnotation(v, fld.Child(k))...)
		case strings.HasPrefix(k, v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix):
			if name := strings.TrimPrefix(k, v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix); !names[name] {
				errs = append(errs, field.Invalid(fld.Key(k), name, "container not found"))
			}
			if v != "" && v != v1.DeprecatedAppArmorBetaProfileRuntimeDefault && v != v1.DeprecatedAppArmorBetaProfileNameUnconfined &&
				!strings.HasPrefix(v, v1.DeprecatedAppArmorBetaProfileNamePrefix) {
				errs = append(errs, field.Invalid(fld.Key(k), v, fmt.Sprintf("invalid AppArmor profile name: %q", v)))
			}
		}
	}
	spec := field.NewPath("spec")
	var podSeccomp *v1.SeccompProfile
	var podAppArmor *v1.AppArmorProfile
	if psc := pod.Spec.SecurityContext; psc != nil {
		podSeccomp, podAppArmor = psc.SeccompProfile, psc.AppArmorProfile
	}
	if v, ok := pod.Annotations[v1.SeccompPodAnnotationKey]; ok && podSeccomp != nil {
		errs = append(errs, seccompAnnotationMatches(v, podSeccomp, spec.Child("securityContext", "seccompProfile"))...)
	}
	for _, list := range []struct {
		name string
		cs   []v1.Container
	}{{"initContainers", pod.Spec.InitContainers}, {"containers", pod.Spec.Containers}} {
		for i, c := range list.cs {
			cfld := spec.Child(list.name).Index(i).Child("securityContext")
			var seccomp *v1.SeccompProfile
			appArmor := podAppArmor
			if c.SecurityContext != nil {
				seccomp = c.SecurityContext.SeccompProfile
				if c.SecurityContext.AppArmorProfile != nil {
					appArmor = c.SecurityContext.AppArmorProfile
				}
			}
			if v, ok := pod.Annotations[v1.SeccompContainerAnnotationKeyPrefix+c.Name]; ok && seccomp != nil {
				errs = append(errs, seccompAnnotationMatches(v, seccomp, cfld.Child("seccompProfile"))...)
			}
			if v, ok := pod.Annotations[v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name]; ok && appArmor != nil {
				errs = append(errs, appArmorAnnotationMatches(v, appArmor, cfld.Child("appArmorProfile"))...)
			}
		}
	}
	return errs
}

func validateSeccompAnnotation(v string, fld *field.Path) field.ErrorList {
	switch {
	case v == v1.SeccompProfileRuntimeDefault, v == v1.DeprecatedSeccompProfileDockerDefault, v == v1.SeccompProfileNameUnconfined:
		return nil
	case strings.HasPrefix(v, v1.SeccompLocalhostProfileNamePrefix):
		return validateLocalDescendingPath(strings.TrimPrefix(v, v1.SeccompLocalhostProfileNamePrefix), fld)
	}
	return field.ErrorList{field.Invalid(fld, v, "must be a valid seccomp profile")}
}

func seccompAnnotationMatches(v string, sp *v1.SeccompProfile, fld *field.Path) field.ErrorList {
	typeMismatch := field.ErrorList{field.Forbidden(fld.Child("type"), "seccomp type in annotation and field must match")}
	switch sp.Type {
	case v1.SeccompProfileTypeUnconfined:
		if v != v1.SeccompProfileNameUnconfined {
			return typeMismatch
		}
	case v1.SeccompProfileTypeRuntimeDefault:
		if v != v1.SeccompProfileRuntimeDefault && v != v1.DeprecatedSeccompProfileDockerDefault {
			return typeMismatch
		}
	case v1.SeccompProfileTypeLocalhost:
		if !strings.HasPrefix(v, v1.SeccompLocalhostProfileNamePrefix) {
			return typeMismatch
		}
		if sp.LocalhostProfile == nil || strings.TrimPrefix(v, v1.SeccompLocalhostProfileNamePrefix) != *sp.LocalhostProfile {
			return field.ErrorList{field.Forbidden(fld.Child("localhostProfile"), "seccomp profile in annotation and field must match")}
		}
	}
	return nil
}

func appArmorAnnotationMatches(v string, p *v1.AppArmorProfile, fld *field.Path) field.ErrorList {
	typeMismatch := field.ErrorList{field.Forbidden(fld.Child("type"), "apparmor type in annotation and field must match")}
	switch p.Type {
	case v1.AppArmorProfileTypeUnconfined:
		if v != v1.DeprecatedAppArmorBetaProfileNameUnconfined {
			return typeMismatch
		}
	case v1.AppArmorProfileTypeRuntimeDefault:
		if v != v1.DeprecatedAppArmorBetaProfileRuntimeDefault {
			return typeMismatch
		}
	case v1.AppArmorProfileTypeLocalhost:
		if !strings.HasPrefix(v, v1.DeprecatedAppArmorBetaProfileNamePrefix) {
			return typeMismatch
		}
		if p.LocalhostProfile == nil || strings.TrimPrefix(v, v1.DeprecatedAppArmorBetaProfileNamePrefix) != *p.LocalhostProfile {
			return field.ErrorList{field.Forbidden(fld.Child("localhostProfile"), "apparmor profile in annotation and field must match")}
		}
	}
	return nil
}
