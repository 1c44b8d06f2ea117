package podvalidation

import (
	"regexp"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodelet/nodelet/internal/lazy"
)

// sysctlPattern is the API server's syntax for a sysctl name (dots or slashes as separators).
var sysctlPattern = lazy.Value[*regexp.Regexp]{New: func() *regexp.Regexp {
	return regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)
}}

// maxSysctlNameLength is the kernel's limit on a sysctl name, as the API server applies it.
const maxSysctlNameLength = 253

func validatePodSecurityContext(sc *v1.PodSecurityContext, fld *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	var errs field.ErrorList
	errs = append(errs, validateUserID(sc.RunAsUser, fld.Child("runAsUser"))...)
	errs = append(errs, validateGroupID(sc.RunAsGroup, fld.Child("runAsGroup"))...)
	errs = append(errs, validateGroupID(sc.FSGroup, fld.Child("fsGroup"))...)
	for i, g := range sc.SupplementalGroups {
		errs = append(errs, validateGroupID(&g, fld.Child("supplementalGroups").Index(i))...)
	}
	errs = append(errs, validateSeccompProfile(sc.SeccompProfile, fld.Child("seccompProfile"))...)
	errs = append(errs, validateAppArmorProfile(sc.AppArmorProfile, fld.Child("appArmorProfile"))...)
	errs = append(errs, validateSELinuxChangePolicy(sc.SELinuxChangePolicy, fld.Child("seLinuxChangePolicy"))...)
	names := sets.New[string]()
	for i, s := range sc.Sysctls {
		f := fld.Child("sysctls").Index(i).Child("name")
		switch {
		case s.Name == "":
			errs = append(errs, field.Required(f, ""))
		case len(s.Name) > maxSysctlNameLength:
			errs = append(errs, field.TooLong(f, s.Name, maxSysctlNameLength))
		case !sysctlPattern.Get().MatchString(s.Name):
			errs = append(errs, field.Invalid(f, s.Name, validation.RegexError("must have at most 253 characters and match regex", sysctlPattern.Get().String())))
		case names.Has(s.Name):
			errs = append(errs, field.Duplicate(f, s.Name))
		}
		names.Insert(s.Name)
	}
	return errs
}

func validateSecurityContext(sc *v1.SecurityContext, fld *field.Path) field.ErrorList {
	if sc == nil {
		return nil
	}
	var errs field.ErrorList
	errs = append(errs, validateUserID(sc.RunAsUser, fld.Child("runAsUser"))...)
	errs = append(errs, validateGroupID(sc.RunAsGroup, fld.Child("runAsGroup"))...)
	if sc.Privileged != nil && *sc.Privileged && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		errs = append(errs, field.Invalid(fld, "", "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
	}
	if sc.ProcMount != nil {
		switch *sc.ProcMount {
		case v1.DefaultProcMount, v1.UnmaskedProcMount:
		default:
			errs = append(errs, field.NotSupported(fld.Child("procMount"), *sc.ProcMount,
				[]v1.ProcMountType{v1.DefaultProcMount, v1.UnmaskedProcMount}))
		}
	}
	errs = append(errs, validateSeccompProfile(sc.SeccompProfile, fld.Child("seccompProfile"))...)
	errs = append(errs, validateAppArmorProfile(sc.AppArmorProfile, fld.Child("appArmorProfile"))...)
	if sc.Capabilities != nil {
		errs = append(errs, validateCapabilities(sc.Capabilities.Add, fld.Child("capabilities", "add"))...)
		errs = append(errs, validateCapabilities(sc.Capabilities.Drop, fld.Child("capabilities", "drop"))...)
	}
	return errs
}

func validateUserID(id *int64, fld *field.Path) field.ErrorList {
	if id == nil {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsValidUserID(*id) {
		errs = append(errs, field.Invalid(fld, *id, msg))
	}
	return errs
}

func validateGroupID(id *int64, fld *field.Path) field.ErrorList {
	if id == nil {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsValidGroupID(*id) {
		errs = append(errs, field.Invalid(fld, *id, msg))
	}
	return errs
}

func validateCapabilities(caps []v1.Capability, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, c := range caps {
		if c == "" {
			errs = append(errs, field.Required(fld.Index(i), "capability names must not be empty"))
		}
	}
	return errs
}
