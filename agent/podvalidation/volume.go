package podvalidation

import (
	"path"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxFileMode is the largest mode a projected file may ask for: no setuid, setgid or sticky bits.
const maxFileMode = 0o777

// validateVolumes returns the valid volume names, for the containers' volumeMounts to refer to.
func validateVolumes(vols []v1.Volume, fld *field.Path) (sets.Set[string], field.ErrorList) {
	names := sets.New[string]()
	var errs field.ErrorList
	for i := range vols {
		v := &vols[i]
		idx := fld.Index(i)
		nameErrs := dnsLabel(v.Name, idx.Child("name"))
		if v.Name == "" {
			nameErrs = field.ErrorList{field.Required(idx.Child("name"), "")}
		}
		if len(nameErrs) == 0 && names.Has(v.Name) {
			nameErrs = field.ErrorList{field.Duplicate(idx.Child("name"), v.Name)}
		}
		if len(nameErrs) == 0 {
			names.Insert(v.Name)
		}
		errs = append(errs, nameErrs...)
		errs = append(errs, validateVolumeSource(&v.VolumeSource, idx)...)
	}
	return names, errs
}

func validateVolumeSource(src *v1.VolumeSource, fld *field.Path) field.ErrorList {
	if errs := exactlyOne(*src, "volume type", fld); len(errs) > 0 {
		return errs
	}
	switch {
	case src.HostPath != nil:
		return validateHostPath(src.HostPath, fld.Child("hostPath"))
	case src.EmptyDir != nil:
		return validateEmptyDir(src.EmptyDir, fld.Child("emptyDir"))
	case src.ConfigMap != nil:
		f := fld.Child("configMap")
		errs := validateObjectName(src.ConfigMap.Name, f.Child("name"))
		errs = append(errs, validateMode(src.ConfigMap.DefaultMode, f.Child("defaultMode"))...)
		return append(errs, validateKeyToPaths(src.ConfigMap.Items, sets.New[string](), f.Child("items"))...)
	case src.Secret != nil:
		f := fld.Child("secret")
		errs := validateObjectName(src.Secret.SecretName, f.Child("secretName"))
		errs = append(errs, validateMode(src.Secret.DefaultMode, f.Child("defaultMode"))...)
		return append(errs, validateKeyToPaths(src.Secret.Items, sets.New[string](), f.Child("items"))...)
	case src.DownwardAPI != nil:
		f := fld.Child("downwardAPI")
		errs := validateMode(src.DownwardAPI.DefaultMode, f.Child("defaultMode"))
		return append(errs, validateDownwardAPIFiles(src.DownwardAPI.Items, sets.New[string](), f.Child("items"))...)
	case src.Projected != nil:
		return validateProjected(src.Projected, fld.Child("projected"))
	case src.PersistentVolumeClaim != nil:
		return validateObjectName(src.PersistentVolumeClaim.ClaimName, fld.Child("persistentVolumeClaim", "claimName"))
	case src.GitRepo != nil:
		f := fld.Child("gitRepo")
		errs := validateLocalDescendingPath(src.GitRepo.Directory, f.Child("directory"))
		if src.GitRepo.Repository == "" {
			errs = append(errs, field.Required(f.Child("repository"), ""))
		}
		return errs
	}
	return nil
}

func validateHostPath(hp *v1.HostPathVolumeSource, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if hp.Path == "" {
		errs = append(errs, field.Required(fld.Child("path"), ""))
	}
	errs = append(errs, validatePathNoBacksteps(hp.Path, fld.Child("path"))...)
	if hp.Type != nil {
		switch *hp.Type {
		case v1.HostPathUnset, v1.HostPathDirectoryOrCreate, v1.HostPathDirectory, v1.HostPathFileOrCreate,
			v1.HostPathFile, v1.HostPathSocket, v1.HostPathCharDev, v1.HostPathBlockDev:
		default:
			errs = append(errs, field.NotSupported(fld.Child("type"), *hp.Type, []v1.HostPathType{
				v1.HostPathUnset, v1.HostPathDirectoryOrCreate, v1.HostPathDirectory, v1.HostPathFileOrCreate,
				v1.HostPathFile, v1.HostPathSocket, v1.HostPathCharDev, v1.HostPathBlockDev}))
		}
	}
	return errs
}

func validateEmptyDir(ed *v1.EmptyDirVolumeSource, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch ed.Medium {
	case v1.StorageMediumDefault, v1.StorageMediumMemory, v1.StorageMediumHugePages:
	default:
		if !strings.HasPrefix(string(ed.Medium), string(v1.StorageMediumHugePagesPrefix)) {
			errs = append(errs, field.NotSupported(fld.Child("medium"), ed.Medium,
				[]v1.StorageMedium{v1.StorageMediumDefault, v1.StorageMediumMemory, v1.StorageMediumHugePages}))
		}
	}
	if ed.SizeLimit != nil && ed.SizeLimit.Sign() < 0 {
		errs = append(errs, field.Invalid(fld.Child("sizeLimit"), ed.SizeLimit.String(), "must be greater than or equal to 0"))
	}
	return errs
}

func validateProjected(p *v1.ProjectedVolumeSource, fld *field.Path) field.ErrorList {
	errs := validateMode(p.DefaultMode, fld.Child("defaultMode"))
	paths := sets.New[string]()
	for i := range p.Sources {
		src := &p.Sources[i]
		f := fld.Child("sources").Index(i)
		if e := exactlyOne(*src, "projection type", f); len(e) > 0 {
			errs = append(errs, e...)
			continue
		}
		switch {
		case src.ConfigMap != nil:
			errs = append(errs, validateObjectName(src.ConfigMap.Name, f.Child("configMap", "name"))...)
			errs = append(errs, validateKeyToPaths(src.ConfigMap.Items, paths, f.Child("configMap", "items"))...)
		case src.Secret != nil:
			errs = append(errs, validateObjectName(src.Secret.Name, f.Child("secret", "name"))...)
			errs = append(errs, validateKeyToPaths(src.Secret.Items, paths, f.Child("secret", "items"))...)
		case src.DownwardAPI != nil:
			errs = append(errs, validateDownwardAPIFiles(src.DownwardAPI.Items, paths, f.Child("downwardAPI", "items"))...)
		case src.ServiceAccountToken != nil:
			errs = append(errs, validateProjectedPath(src.ServiceAccountToken.Path, paths, f.Child("serviceAccountToken", "path"))...)
		case src.ClusterTrustBundle != nil:
			errs = append(errs, validateProjectedPath(src.ClusterTrustBundle.Path, paths, f.Child("clusterTrustBundle", "path"))...)
		}
	}
	return errs
}

func validateKeyToPaths(items []v1.KeyToPath, paths sets.Set[string], fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, it := range items {
		f := fld.Index(i)
		if it.Key == "" {
			errs = append(errs, field.Required(f.Child("key"), ""))
		} else {
			for _, msg := range validation.IsConfigMapKey(it.Key) {
				errs = append(errs, field.Invalid(f.Child("key"), it.Key, msg))
			}
		}
		errs = append(errs, validateProjectedPath(it.Path, paths, f.Child("path"))...)
		errs = append(errs, validateMode(it.Mode, f.Child("mode"))...)
	}
	return errs
}

// supportedDownwardFieldPaths are the fields a downwardAPI volume file may hold.
var supportedDownwardFieldPaths = []string{"metadata.name", "metadata.namespace", "metadata.uid",
	"metadata.labels", "metadata.annotations"}

func validateDownwardAPIFiles(items []v1.DownwardAPIVolumeFile, paths sets.Set[string], fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range items {
		it := &items[i]
		f := fld.Index(i)
		errs = append(errs, validateProjectedPath(it.Path, paths, f.Child("path"))...)
		errs = append(errs, validateMode(it.Mode, f.Child("mode"))...)
		switch {
		case it.FieldRef != nil && it.ResourceFieldRef != nil:
			errs = append(errs, field.Invalid(f, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
		case it.FieldRef != nil:
			errs = append(errs, validateFieldRef(it.FieldRef, supportedDownwardFieldPaths, f.Child("fieldRef"))...)
		case it.ResourceFieldRef != nil:
			errs = append(errs, validateResourceFieldRef(it.ResourceFieldRef, f.Child("resourceFieldRef"))...)
		default:
			errs = append(errs, field.Required(f, "one of fieldRef and resourceFieldRef is required"))
		}
	}
	return errs
}

func validateFieldRef(ref *v1.ObjectFieldSelector, supported []string, fld *field.Path) field.ErrorList {
	if ref.APIVersion != "" && ref.APIVersion != "v1" {
		return field.ErrorList{field.NotSupported(fld.Child("apiVersion"), ref.APIVersion, []string{"v1"})}
	}
	p := ref.FieldPath
	// metadata.labels['key'] and metadata.annotations['key'] select one entry.
	if i := strings.Index(p, "["); i > 0 && strings.HasSuffix(p, "']") && p[i:i+2] == "['" {
		p = p[:i]
	}
	for _, s := range supported {
		if p == s {
			return nil
		}
	}
	if ref.FieldPath == "" {
		return field.ErrorList{field.Required(fld.Child("fieldPath"), "")}
	}
	return field.ErrorList{field.NotSupported(fld.Child("fieldPath"), ref.FieldPath, supported)}
}

var supportedResourceFieldRefs = []string{"limits.cpu", "limits.memory", "limits.ephemeral-storage",
	"requests.cpu", "requests.memory", "requests.ephemeral-storage"}

func validateResourceFieldRef(ref *v1.ResourceFieldSelector, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	ok := strings.HasPrefix(ref.Resource, "limits.hugepages-") || strings.HasPrefix(ref.Resource, "requests.hugepages-")
	for _, r := range supportedResourceFieldRefs {
		ok = ok || ref.Resource == r
	}
	if !ok {
		errs = append(errs, field.NotSupported(fld.Child("resource"), ref.Resource, supportedResourceFieldRefs))
	}
	if ref.Divisor.Sign() < 0 || (!ref.Divisor.IsZero() && ref.Divisor.Cmp(resource.MustParse("1m")) < 0) {
		errs = append(errs, field.Invalid(fld.Child("divisor"), ref.Divisor.String(), "must be a positive quantity"))
	}
	return errs
}

// validateProjectedPath checks a file path inside a configMap, secret, downwardAPI or projected
// volume: the volume manager joins it under the volume's directory.
func validateProjectedPath(p string, paths sets.Set[string], fld *field.Path) field.ErrorList {
	if p == "" {
		return field.ErrorList{field.Required(fld, "")}
	}
	errs := validateLocalDescendingPath(p, fld)
	if strings.HasPrefix(p, "..") {
		errs = append(errs, field.Invalid(fld, p, "must not start with '..'"))
	}
	if len(errs) > 0 {
		return errs
	}
	clean := path.Clean(p)
	if paths.Has(clean) {
		return field.ErrorList{field.Duplicate(fld, p)}
	}
	paths.Insert(clean)
	return nil
}

func validateMode(mode *int32, fld *field.Path) field.ErrorList {
	if mode != nil && (*mode < 0 || *mode > maxFileMode) {
		return field.ErrorList{field.Invalid(fld, *mode, "must be a number between 0 and 0777 (octal), both inclusive")}
	}
	return nil
}

func validateObjectName(name string, fld *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fld, "")}
	}
	return dnsSubdomain(name, fld)
}
