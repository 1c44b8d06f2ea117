package podvalidation

import (
	"reflect"
	"unicode"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodelet/nodelet/internal/lazy"
)

// ephemeralAllowed names the fields of EphemeralContainerCommon a debug container may set. It is
// an allow list, as the API server keeps it, so that a field added to the API later is refused
// until someone decides a debug container may use it: ports, probes, lifecycle hooks, resources
// and restart policies would make the debug container part of the workload, which it must not be.
var ephemeralAllowed = lazy.Value[sets.Set[string]]{New: func() sets.Set[string] {
	return sets.New(
		"Name", "Image", "Command", "Args", "WorkingDir", "EnvFrom", "Env", "VolumeMounts", "VolumeDevices",
		"TerminationMessagePath", "TerminationMessagePolicy", "ImagePullPolicy", "SecurityContext",
		"Stdin", "StdinOnce", "TTY",
	)
}}

// ValidateEphemeralContainers checks a pod's ephemeral containers as the API server checks the
// ephemeralcontainers subresource. The agent runs it on pods from the API server before it starts
// a debug container, so a field that reaches a path or a runtime request has been checked even if
// the API server that sent it did not.
func ValidateEphemeralContainers(spec *v1.PodSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range spec.EphemeralContainers {
		errs = append(errs, ValidateEphemeralContainer(spec, i, fld.Index(i))...)
	}
	return errs
}

// ValidateEphemeralContainer checks spec.EphemeralContainers[i] alone, so one bad debug container
// does not keep the others (or the pod) from running.
func ValidateEphemeralContainer(spec *v1.PodSpec, i int, fld *field.Path) field.ErrorList {
	ec := &spec.EphemeralContainers[i]
	vols := sets.New[string]()
	for _, v := range spec.Volumes {
		vols.Insert(v.Name)
	}
	targets := sets.New[string]()
	for _, c := range spec.InitContainers {
		targets.Insert(c.Name)
	}
	for _, c := range spec.Containers {
		targets.Insert(c.Name)
	}
	// Names are one namespace across the three lists: earlier debug containers count too.
	taken := targets.Clone()
	for j := 0; j < i; j++ {
		taken.Insert(spec.EphemeralContainers[j].Name)
	}

	var errs field.ErrorList
	switch {
	case ec.Name == "":
		errs = append(errs, field.Required(fld.Child("name"), ""))
	case taken.Has(ec.Name):
		errs = append(errs, field.Duplicate(fld.Child("name"), ec.Name))
	default:
		errs = append(errs, dnsLabel(ec.Name, fld.Child("name"))...)
	}
	errs = append(errs, validateContainer((*v1.Container)(&ec.EphemeralContainerCommon), false, vols, fld)...)
	errs = append(errs, validateProcMount(spec, (*v1.Container)(&ec.EphemeralContainerCommon), fld)...)
	if ec.TargetContainerName != "" && !targets.Has(ec.TargetContainerName) {
		errs = append(errs, field.NotFound(fld.Child("targetContainerName"), ec.TargetContainerName))
	}
	errs = append(errs, onlyAllowedFields(ec.EphemeralContainerCommon, fld)...)
	for j, m := range ec.VolumeMounts {
		// A subPath is a bind mount that stays until the pod ends: debug containers may not make them.
		if m.SubPath != "" {
			errs = append(errs, field.Forbidden(fld.Child("volumeMounts").Index(j).Child("subPath"), "cannot be set for an Ephemeral Container"))
		}
		if m.SubPathExpr != "" {
			errs = append(errs, field.Forbidden(fld.Child("volumeMounts").Index(j).Child("subPathExpr"), "cannot be set for an Ephemeral Container"))
		}
	}
	return errs
}

func onlyAllowedFields(common v1.EphemeralContainerCommon, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	v, t := reflect.ValueOf(common), reflect.TypeOf(common)
	for i := 0; i < t.NumField(); i++ {
		// restartPolicy has its own error from validateContainer.
		if ephemeralAllowed.Get().Has(t.Field(i).Name) || t.Field(i).Name == "RestartPolicy" || v.Field(i).IsZero() {
			continue
		}
		name := t.Field(i).Name
		r, n := utf8.DecodeRuneInString(name)
		errs = append(errs, field.Forbidden(fld.Child(string(unicode.ToLower(r))+name[n:]), "cannot be set for an Ephemeral Container"))
	}
	return errs
}
