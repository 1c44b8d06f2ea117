package podvalidation

import (
	"fmt"
	"path"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateContainers checks one list; names collects container names across the pod's lists,
// which share one namespace (logs, status and runtime names are keyed by them).
func validateContainers(cs []v1.Container, init bool, vols, names sets.Set[string], fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range cs {
		c := &cs[i]
		idx := fld.Index(i)
		switch {
		case c.Name == "":
			errs = append(errs, field.Required(idx.Child("name"), ""))
		case names.Has(c.Name):
			errs = append(errs, field.Duplicate(idx.Child("name"), c.Name))
		default:
			errs = append(errs, dnsLabel(c.Name, idx.Child("name"))...)
			names.Insert(c.Name)
		}
		errs = append(errs, validateContainer(c, init, vols, idx)...)
	}
	return errs
}

func validateContainer(c *v1.Container, init bool, vols sets.Set[string], fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Image == "" {
		errs = append(errs, field.Required(fld.Child("image"), ""))
	} else if strings.TrimSpace(c.Image) != c.Image {
		errs = append(errs, field.Invalid(fld.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	errs = append(errs, validatePorts(c.Ports, fld.Child("ports"))...)
	errs = append(errs, validateEnv(c.Env, fld.Child("env"))...)
	errs = append(errs, validateEnvFrom(c.EnvFrom, fld.Child("envFrom"))...)
	errs = append(errs, validateVolumeMounts(c.VolumeMounts, vols, fld.Child("volumeMounts"))...)
	errs = append(errs, validateResources(&c.Resources, fld.Child("resources"))...)
	errs = append(errs, validateTermination(c, fld)...)
	errs = append(errs, validatePullPolicy(c.ImagePullPolicy, fld.Child("imagePullPolicy"))...)
	errs = append(errs, validateProbe(c.LivenessProbe, true, fld.Child("livenessProbe"))...)
	errs = append(errs, validateProbe(c.ReadinessProbe, false, fld.Child("readinessProbe"))...)
	errs = append(errs, validateProbe(c.StartupProbe, true, fld.Child("startupProbe"))...)
	if p := c.ReadinessProbe; p != nil && p.TerminationGracePeriodSeconds != nil {
		errs = append(errs, field.Invalid(fld.Child("readinessProbe", "terminationGracePeriodSeconds"), *p.TerminationGracePeriodSeconds,
			"must not be set for readinessProbes"))
	}
	errs = append(errs, validateLifecycle(c.Lifecycle, fld.Child("lifecycle"))...)
	errs = append(errs, validateSecurityContext(c.SecurityContext, fld.Child("securityContext"))...)
	if c.RestartPolicy != nil {
		if !init {
			errs = append(errs, field.Forbidden(fld.Child("restartPolicy"), "may not be set for non-init containers"))
		} else if *c.RestartPolicy != v1.ContainerRestartPolicyAlways {
			errs = append(errs, field.NotSupported(fld.Child("restartPolicy"), *c.RestartPolicy,
				[]v1.ContainerRestartPolicy{v1.ContainerRestartPolicyAlways}))
		}
	}
	if init && c.RestartPolicy == nil {
		errs = append(errs, forbidOnRunToCompletion(c, fld)...)
	}
	return errs
}

// forbidOnRunToCompletion refuses what only a running container can use on an init container that
// runs to completion: neither the prober nor the hooks would ever run them, as the API server says.
func forbidOnRunToCompletion(c *v1.Container, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct {
		name string
		set  bool
	}{{"lifecycle", c.Lifecycle != nil}, {"livenessProbe", c.LivenessProbe != nil},
		{"readinessProbe", c.ReadinessProbe != nil}, {"startupProbe", c.StartupProbe != nil}} {
		if f.set {
			errs = append(errs, field.Forbidden(fld.Child(f.name), "may not be set for init containers without restartPolicy=Always"))
		}
	}
	return errs
}

func validatePorts(ports []v1.ContainerPort, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, p := range ports {
		f := fld.Index(i)
		if p.Name != "" {
			for _, msg := range validation.IsValidPortName(p.Name) {
				errs = append(errs, field.Invalid(f.Child("name"), p.Name, msg))
			}
			if names.Has(p.Name) {
				errs = append(errs, field.Duplicate(f.Child("name"), p.Name))
			}
			names.Insert(p.Name)
		}
		for _, msg := range validation.IsValidPortNum(int(p.ContainerPort)) {
			errs = append(errs, field.Invalid(f.Child("containerPort"), p.ContainerPort, msg))
		}
		if p.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(p.HostPort)) {
				errs = append(errs, field.Invalid(f.Child("hostPort"), p.HostPort, msg))
			}
		}
		if p.HostIP != "" {
			errs = append(errs, validation.IsValidIP(f.Child("hostIP"), p.HostIP)...)
		}
		switch p.Protocol {
		case v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP:
		case "":
			errs = append(errs, field.Required(f.Child("protocol"), ""))
		default:
			errs = append(errs, field.NotSupported(f.Child("protocol"), p.Protocol,
				[]v1.Protocol{v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}))
		}
	}
	return errs
}

// supportedEnvFieldPaths are the pod fields an env var may take its value from.
var supportedEnvFieldPaths = []string{"metadata.name", "metadata.namespace", "metadata.uid",
	"metadata.labels", "metadata.annotations", "spec.nodeName", "spec.serviceAccountName",
	"status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"}

func validateEnv(env []v1.EnvVar, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i := range env {
		e := &env[i]
		f := fld.Index(i)
		errs = append(errs, envVarName(e.Name, f.Child("name"))...)
		if e.ValueFrom == nil {
			continue
		}
		if e.Value != "" {
			errs = append(errs, field.Invalid(f.Child("valueFrom"), "", "may not be specified when `value` is not empty"))
		}
		vf := f.Child("valueFrom")
		if e := exactlyOne(*e.ValueFrom, "valueFrom source", vf); len(e) > 0 {
			errs = append(errs, e...)
			continue
		}
		switch s := e.ValueFrom; {
		case s.FieldRef != nil:
			errs = append(errs, validateFieldRef(s.FieldRef, supportedEnvFieldPaths, vf.Child("fieldRef"))...)
		case s.ResourceFieldRef != nil:
			errs = append(errs, validateResourceFieldRef(s.ResourceFieldRef, vf.Child("resourceFieldRef"))...)
		case s.ConfigMapKeyRef != nil:
			errs = append(errs, validateObjectName(s.ConfigMapKeyRef.Name, vf.Child("configMapKeyRef", "name"))...)
			errs = append(errs, configKey(s.ConfigMapKeyRef.Key, vf.Child("configMapKeyRef", "key"))...)
		case s.SecretKeyRef != nil:
			errs = append(errs, validateObjectName(s.SecretKeyRef.Name, vf.Child("secretKeyRef", "name"))...)
			errs = append(errs, configKey(s.SecretKeyRef.Key, vf.Child("secretKeyRef", "key"))...)
		case s.FileKeyRef != nil:
			errs = append(errs, field.Forbidden(vf.Child("fileKeyRef"), "is not supported for static pods"))
		}
	}
	return errs
}

func validateEnvFrom(envFrom []v1.EnvFromSource, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, e := range envFrom {
		f := fld.Index(i)
		if e.Prefix != "" {
			errs = append(errs, envVarName(e.Prefix, f.Child("prefix"))...)
		}
		switch {
		case e.ConfigMapRef != nil && e.SecretRef != nil:
			errs = append(errs, field.Invalid(f, "", "may not have more than one field specified at a time"))
		case e.ConfigMapRef != nil:
			errs = append(errs, validateObjectName(e.ConfigMapRef.Name, f.Child("configMapRef", "name"))...)
		case e.SecretRef != nil:
			errs = append(errs, validateObjectName(e.SecretRef.Name, f.Child("secretRef", "name"))...)
		default:
			errs = append(errs, field.Invalid(f, "", "must specify one of: `configMapRef` or `secretRef`"))
		}
	}
	return errs
}

func envVarName(name string, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		return field.ErrorList{field.Required(fld, "")}
	}
	for _, msg := range validation.IsRelaxedEnvVarName(name) {
		errs = append(errs, field.Invalid(fld, name, msg))
	}
	return errs
}

func configKey(key string, fld *field.Path) field.ErrorList {
	if key == "" {
		return field.ErrorList{field.Required(fld, "")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsConfigMapKey(key) {
		errs = append(errs, field.Invalid(fld, key, msg))
	}
	return errs
}

func validateVolumeMounts(mounts []v1.VolumeMount, vols sets.Set[string], fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	points := sets.New[string]()
	for i := range mounts {
		m := &mounts[i]
		f := fld.Index(i)
		switch {
		case m.Name == "":
			errs = append(errs, field.Required(f.Child("name"), ""))
		case !vols.Has(m.Name):
			errs = append(errs, field.NotFound(f.Child("name"), m.Name))
		}
		errs = append(errs, validateMountPath(m.MountPath, points, f.Child("mountPath"))...)
		if m.SubPath != "" && m.SubPathExpr != "" {
			errs = append(errs, field.Invalid(f.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
		}
		if m.SubPath != "" {
			errs = append(errs, validateLocalDescendingPath(m.SubPath, f.Child("subPath"))...)
		}
		if m.SubPathExpr != "" {
			errs = append(errs, validateLocalDescendingPath(m.SubPathExpr, f.Child("subPathExpr"))...)
		}
		if p := m.MountPropagation; p != nil {
			switch *p {
			case v1.MountPropagationNone, v1.MountPropagationHostToContainer, v1.MountPropagationBidirectional:
			default:
				errs = append(errs, field.NotSupported(f.Child("mountPropagation"), *p, []v1.MountPropagationMode{
					v1.MountPropagationNone, v1.MountPropagationHostToContainer, v1.MountPropagationBidirectional}))
			}
		}
		errs = append(errs, validateRecursiveReadOnly(m, f.Child("recursiveReadOnly"))...)
	}
	return errs
}

// validateMountPath checks a path inside the container; the runtime resolves it in the rootfs,
// and a '..' element has no use there but to confuse that resolution.
func validateMountPath(p string, points sets.Set[string], fld *field.Path) field.ErrorList {
	if p == "" {
		return field.ErrorList{field.Required(fld, "")}
	}
	if errs := validatePathNoBacksteps(p, fld); len(errs) > 0 {
		return errs
	}
	clean := path.Clean(p)
	if points.Has(clean) {
		return field.ErrorList{field.Invalid(fld, p, "must be unique")}
	}
	points.Insert(clean)
	return nil
}

func validateResources(r *v1.ResourceRequirements, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	for name, q := range r.Limits {
		f := fld.Child("limits").Key(string(name))
		errs = append(errs, metav1validation.ValidateLabelName(string(name), f)...)
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(f, q.String(), "must be greater than or equal to 0"))
		}
	}
	for name, q := range r.Requests {
		f := fld.Child("requests").Key(string(name))
		errs = append(errs, metav1validation.ValidateLabelName(string(name), f)...)
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(f, q.String(), "must be greater than or equal to 0"))
		}
		if l, ok := r.Limits[name]; ok && q.Cmp(l) > 0 {
			errs = append(errs, field.Invalid(f, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, l.String())))
		}
	}
	return errs
}

func validateTermination(c *v1.Container, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	f := fld.Child("terminationMessagePath")
	switch p := c.TerminationMessagePath; {
	case p == "":
		errs = append(errs, field.Required(f, ""))
	case !path.IsAbs(p):
		errs = append(errs, field.Invalid(f, p, "must be an absolute path"))
	default:
		errs = append(errs, validatePathNoBacksteps(p, f)...)
	}
	switch c.TerminationMessagePolicy {
	case v1.TerminationMessageReadFile, v1.TerminationMessageFallbackToLogsOnError:
	case "":
		errs = append(errs, field.Required(fld.Child("terminationMessagePolicy"), ""))
	default:
		errs = append(errs, field.NotSupported(fld.Child("terminationMessagePolicy"), c.TerminationMessagePolicy,
			[]v1.TerminationMessagePolicy{v1.TerminationMessageReadFile, v1.TerminationMessageFallbackToLogsOnError}))
	}
	return errs
}

func validatePullPolicy(p v1.PullPolicy, fld *field.Path) field.ErrorList {
	switch p {
	case v1.PullAlways, v1.PullIfNotPresent, v1.PullNever:
		return nil
	case "":
		return field.ErrorList{field.Required(fld, "")}
	}
	return field.ErrorList{field.NotSupported(fld, p, []v1.PullPolicy{v1.PullAlways, v1.PullIfNotPresent, v1.PullNever})}
}

func validateProbe(p *v1.Probe, successMustBeOne bool, fld *field.Path) field.ErrorList {
	if p == nil {
		return nil
	}
	errs := exactlyOne(p.ProbeHandler, "handler type", fld)
	if len(errs) == 0 {
		errs = append(errs, validateHandler(p.HTTPGet, p.TCPSocket, p.GRPC, fld)...)
	}
	for _, n := range []struct {
		name string
		v    int32
	}{{"initialDelaySeconds", p.InitialDelaySeconds}, {"timeoutSeconds", p.TimeoutSeconds},
		{"periodSeconds", p.PeriodSeconds}, {"successThreshold", p.SuccessThreshold}, {"failureThreshold", p.FailureThreshold}} {
		if n.v < 0 {
			errs = append(errs, field.Invalid(fld.Child(n.name), n.v, "must be greater than or equal to 0"))
		}
	}
	if successMustBeOne && p.SuccessThreshold > 1 {
		errs = append(errs, field.Invalid(fld.Child("successThreshold"), p.SuccessThreshold, "must be 1"))
	}
	if g := p.TerminationGracePeriodSeconds; g != nil && *g <= 0 {
		errs = append(errs, field.Invalid(fld.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
	}
	return errs
}

func validateLifecycle(l *v1.Lifecycle, fld *field.Path) field.ErrorList {
	if l == nil {
		return nil
	}
	var errs field.ErrorList
	for _, h := range []struct {
		name string
		h    *v1.LifecycleHandler
	}{{"postStart", l.PostStart}, {"preStop", l.PreStop}} {
		if h.h == nil {
			continue
		}
		f := fld.Child(h.name)
		if e := exactlyOne(*h.h, "handler type", f); len(e) > 0 {
			errs = append(errs, e...)
			continue
		}
		errs = append(errs, validateHandler(h.h.HTTPGet, h.h.TCPSocket, nil, f)...)
		if h.h.Sleep != nil && h.h.Sleep.Seconds < 0 {
			errs = append(errs, field.Invalid(f.Child("sleep", "seconds"), h.h.Sleep.Seconds, "must be greater than or equal to 0"))
		}
	}
	return errs
}

func validateHandler(get *v1.HTTPGetAction, tcp *v1.TCPSocketAction, grpc *v1.GRPCAction, fld *field.Path) field.ErrorList {
	var errs field.ErrorList
	if get != nil {
		errs = append(errs, validatePortNumOrName(get.Port, fld.Child("httpGet", "port"))...)
		switch get.Scheme {
		case "", v1.URISchemeHTTP, v1.URISchemeHTTPS:
		default:
			errs = append(errs, field.NotSupported(fld.Child("httpGet", "scheme"), get.Scheme,
				[]v1.URIScheme{v1.URISchemeHTTP, v1.URISchemeHTTPS}))
		}
		for i, h := range get.HTTPHeaders {
			for _, msg := range validation.IsHTTPHeaderName(h.Name) {
				errs = append(errs, field.Invalid(fld.Child("httpGet", "httpHeaders").Index(i).Child("name"), h.Name, msg))
			}
		}
	}
	if tcp != nil {
		errs = append(errs, validatePortNumOrName(tcp.Port, fld.Child("tcpSocket", "port"))...)
	}
	if grpc != nil {
		for _, msg := range validation.IsValidPortNum(int(grpc.Port)) {
			errs = append(errs, field.Invalid(fld.Child("grpc", "port"), grpc.Port, msg))
		}
	}
	return errs
}

func validatePortNumOrName(port intstr.IntOrString, fld *field.Path) field.ErrorList {
	var msgs []string
	switch port.Type {
	case intstr.Int:
		msgs = validation.IsValidPortNum(port.IntValue())
	case intstr.String:
		msgs = validation.IsValidPortName(port.StrVal)
	default:
		msgs = []string{fmt.Sprintf("unknown type: %v", port.Type)}
	}
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(fld, port.String(), msg))
	}
	return errs
}
