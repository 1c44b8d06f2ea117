// Package podvalidation checks pods that did not come through an API server (static pods from a
// manifest folder or URL) the way the API server checks a created pod, so that no field of an
// unchecked manifest becomes a path, a mount or a runtime request before it has been validated.
// It follows ValidatePodCreate of k8s.io/kubernetes on the v1 types, built from apimachinery's
// helpers, and adds what only a node needs: an explicit UID must be a safe single path element.
package podvalidation

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"

	v1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nodelet/nodelet/internal/lazy"
)

// MaxUIDLength bounds an explicit static pod UID; a UUID is 36 characters, the derived hash 32.
const MaxUIDLength = 128

// uidPattern keeps an explicit UID a single path element the agent can join under its root dir.
var uidPattern = lazy.Value[*regexp.Regexp]{New: func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`) }}

// ValidateStaticPod validates a defaulted pod read from a file or URL. The errors name the field
// path as the API server does (spec.volumes[0].name: Invalid value: ...).
func ValidateStaticPod(pod *v1.Pod) field.ErrorList {
	meta := field.NewPath("metadata")
	errs := apivalidation.ValidateObjectMeta(&pod.ObjectMeta, true, apivalidation.NameIsDNSSubdomain, meta)
	errs = append(errs, ValidateUID(string(pod.UID), meta.Child("uid"))...)
	errs = append(errs, validatePodSpec(&pod.Spec, field.NewPath("spec"))...)
	errs = append(errs, validateProfileAnnotations(pod)...)
	return errs
}

// ValidateUID refuses a UID that is not one safe path element: the agent names the pod's
// directories after it, so "../x" would place them, and later remove them, outside its root.
func ValidateUID(uid string, fld *field.Path) field.ErrorList {
	switch {
	case uid == "":
		return field.ErrorList{field.Required(fld, "")}
	case len(uid) > MaxUIDLength:
		return field.ErrorList{field.TooLong(fld, uid, MaxUIDLength)}
	case !uidPattern.Get().MatchString(uid):
		return field.ErrorList{field.Invalid(fld, uid,
			validation.RegexError("a static pod uid must be a single path element", uidPattern.Get().String(), "3f2a9c1e-8b4d-4c2e-9f1a-1234567890ab", "web-1"))}
	}
	return nil
}

func validatePodSpec(spec *v1.PodSpec, fld *field.Path) field.ErrorList {
	vols, errs := validateVolumes(spec.Volumes, fld.Child("volumes"))
	if len(spec.Containers) == 0 {
		errs = append(errs, field.Required(fld.Child("containers"), "must have at least one container"))
	}
	names := sets.New[string]()
	errs = append(errs, validateContainers(spec.InitContainers, true, vols, names, fld.Child("initContainers"))...)
	errs = append(errs, validateContainers(spec.Containers, false, vols, names, fld.Child("containers"))...)
	if len(spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(fld.Child("ephemeralContainers"), "static pods may not have ephemeral containers"))
	}
	errs = append(errs, validateRestartPolicy(spec.RestartPolicy, fld.Child("restartPolicy"))...)
	errs = append(errs, validateDNS(spec, fld)...)
	errs = append(errs, validateHostAliases(spec.HostAliases, fld.Child("hostAliases"))...)
	errs = append(errs, validatePodSecurityContext(spec.SecurityContext, fld.Child("securityContext"))...)
	errs = append(errs, validateHostUsers(spec, fld)...)
	errs = append(errs, validateProcMounts(spec, fld)...)
	_, refused := unsupported(spec, fld, false)
	errs = append(errs, refused...)
	errs = append(errs, metav1validation.ValidateLabels(spec.NodeSelector, fld.Child("nodeSelector"))...)
	errs = append(errs, ValidateTolerations(spec.Tolerations, fld.Child("tolerations"))...)
	if n := spec.RuntimeClassName; n != nil {
		errs = append(errs, dnsSubdomain(*n, fld.Child("runtimeClassName"))...)
	}
	if spec.Overhead != nil {
		errs = append(errs, validateResources(&v1.ResourceRequirements{Limits: spec.Overhead}, fld.Child("overhead"))...)
	}
	if spec.ServiceAccountName != "" {
		errs = append(errs, dnsSubdomain(spec.ServiceAccountName, fld.Child("serviceAccountName"))...)
	}
	for i, s := range spec.ImagePullSecrets {
		errs = append(errs, dnsSubdomain(s.Name, fld.Child("imagePullSecrets").Index(i).Child("name"))...)
	}
	if g := spec.TerminationGracePeriodSeconds; g != nil && *g < 0 {
		errs = append(errs, field.Invalid(fld.Child("terminationGracePeriodSeconds"), *g, "must be >= 0"))
	}
	if d := spec.ActiveDeadlineSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(fld.Child("activeDeadlineSeconds"), *d, "must be > 0"))
	}
	return errs
}

func validateRestartPolicy(p v1.RestartPolicy, fld *field.Path) field.ErrorList {
	switch p {
	case v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever:
		return nil
	case "":
		return field.ErrorList{field.Required(fld, "")}
	}
	return field.ErrorList{field.NotSupported(fld, p,
		[]v1.RestartPolicy{v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever})}
}

func validateDNS(spec *v1.PodSpec, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch spec.DNSPolicy {
	case v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet, v1.DNSDefault:
	case v1.DNSNone:
		if spec.DNSConfig == nil || len(spec.DNSConfig.Nameservers) == 0 {
			errs = append(errs, field.Required(fld.Child("dnsConfig", "nameservers"), "must provide at least one DNS nameserver when dnsPolicy is None"))
		}
	case "":
		errs = append(errs, field.Required(fld.Child("dnsPolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(fld.Child("dnsPolicy"), spec.DNSPolicy,
			[]v1.DNSPolicy{v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet, v1.DNSDefault, v1.DNSNone}))
	}
	if c := spec.DNSConfig; c != nil {
		for i, ns := range c.Nameservers {
			errs = append(errs, validation.IsValidIP(fld.Child("dnsConfig", "nameservers").Index(i), ns)...)
		}
		for i, s := range c.Searches {
			errs = append(errs, dnsSubdomain(strings.TrimSuffix(s, "."), fld.Child("dnsConfig", "searches").Index(i))...)
		}
		for i, o := range c.Options {
			if o.Name == "" {
				errs = append(errs, field.Required(fld.Child("dnsConfig", "options").Index(i).Child("name"), ""))
			}
		}
	}
	if spec.Hostname != "" {
		errs = append(errs, dnsLabel(spec.Hostname, fld.Child("hostname"))...)
	}
	if spec.Subdomain != "" {
		errs = append(errs, dnsLabel(spec.Subdomain, fld.Child("subdomain"))...)
	}
	return errs
}

func validateHostAliases(aliases []v1.HostAlias, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, a := range aliases {
		errs = append(errs, validation.IsValidIP(fld.Index(i).Child("ip"), a.IP)...)
		for j, h := range a.Hostnames {
			errs = append(errs, dnsSubdomain(h, fld.Index(i).Child("hostnames").Index(j))...)
		}
	}
	return errs
}

func dnsLabel(v string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(v) {
		errs = append(errs, field.Invalid(fld, v, msg))
	}
	return errs
}

func dnsSubdomain(v string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(v) {
		errs = append(errs, field.Invalid(fld, v, msg))
	}
	return errs
}

// setMembers names the non-nil pointer fields of a one-of struct (a volume source, a probe
// handler…), by their JSON names, so "exactly one" stays true as the API adds members.
func setMembers(oneOf any) []string {
	v := reflect.ValueOf(oneOf)
	var set []string
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Kind() == reflect.Pointer && !f.IsNil() {
			set = append(set, strings.Split(v.Type().Field(i).Tag.Get("json"), ",")[0])
		}
	}
	return set
}

// exactlyOne reports the API server's errors for a one-of struct with none or several members set.
func exactlyOne(oneOf any, what string, fld *field.Path) field.ErrorList {
	switch set := setMembers(oneOf); len(set) {
	case 0:
		return field.ErrorList{field.Required(fld, fmt.Sprintf("must specify a %s", what))}
	case 1:
		return nil
	default:
		return field.ErrorList{field.Forbidden(fld.Child(set[1]), fmt.Sprintf("may not specify more than 1 %s", what))}
	}
}
