package podvalidation

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestValidateStaticPodSecurityProfiles(t *testing.T) {
	str := func(s string) *string { return &s }
	unmasked := v1.UnmaskedProcMount
	csc := func(p *v1.Pod) *v1.SecurityContext {
		if p.Spec.Containers[0].SecurityContext == nil {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{}
		}
		return p.Spec.Containers[0].SecurityContext
	}
	tests := []struct {
		name   string
		mutate func(p *v1.Pod)
		want   string // "" accepts the pod
	}{
		{"seccomp localhost", func(p *v1.Pod) {
			p.Spec.SecurityContext.SeccompProfile = &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: str("profiles/deny-mkdir.json")}
		}, ""},
		{"seccomp localhost steps up", func(p *v1.Pod) {
			csc(p).SeccompProfile = &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: str("../../etc/shadow")}
		}, `spec.containers[0].securityContext.seccompProfile.localhostProfile: Invalid value: "../../etc/shadow": must not contain '..'`},
		{"seccomp localhost absolute", func(p *v1.Pod) {
			p.Spec.SecurityContext.SeccompProfile = &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: str("/etc/x.json")}
		}, `spec.securityContext.seccompProfile.localhostProfile: Invalid value: "/etc/x.json": must be a relative path`},
		{"seccomp localhost missing name", func(p *v1.Pod) {
			p.Spec.SecurityContext.SeccompProfile = &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}
		}, `spec.securityContext.seccompProfile.localhostProfile: Required value: must be set when seccomp type is Localhost`},
		{"seccomp name with another type", func(p *v1.Pod) {
			csc(p).SeccompProfile = &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault, LocalhostProfile: str("x.json")}
		}, `spec.containers[0].securityContext.seccompProfile.localhostProfile: Invalid value`},
		{"seccomp type unknown", func(p *v1.Pod) { csc(p).SeccompProfile = &v1.SeccompProfile{Type: "Strict"} },
			`spec.containers[0].securityContext.seccompProfile.type: Unsupported value: "Strict"`},
		{"seccomp type empty", func(p *v1.Pod) { p.Spec.SecurityContext.SeccompProfile = &v1.SeccompProfile{} },
			`spec.securityContext.seccompProfile.type: Required value`},
		{"seccomp annotation steps up", func(p *v1.Pod) { p.Annotations[v1.SeccompPodAnnotationKey] = "localhost/../x" },
			`metadata.annotations.seccomp.security.alpha.kubernetes.io/pod: Invalid value: "../x"`},
		{"seccomp annotation unknown", func(p *v1.Pod) { p.Annotations[v1.SeccompContainerAnnotationKeyPrefix+"app"] = "strict" },
			`Invalid value: "strict": must be a valid seccomp profile`},
		{"seccomp annotation disagrees", func(p *v1.Pod) {
			p.Annotations[v1.SeccompContainerAnnotationKeyPrefix+"app"] = "localhost/a.json"
			csc(p).SeccompProfile = &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: str("b.json")}
		}, `spec.containers[0].securityContext.seccompProfile.localhostProfile: Forbidden: seccomp profile in annotation and field must match`},
		{"seccomp annotation agrees", func(p *v1.Pod) {
			p.Annotations[v1.SeccompPodAnnotationKey] = "runtime/default"
			p.Spec.SecurityContext.SeccompProfile = &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}
		}, ""},
		{"apparmor localhost", func(p *v1.Pod) {
			p.Spec.SecurityContext.AppArmorProfile = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: str("x")}
		}, ""},
		{"apparmor padded", func(p *v1.Pod) {
			csc(p).AppArmorProfile = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: str(" x")}
		}, `spec.containers[0].securityContext.appArmorProfile.localhostProfile: Invalid value: " x": must not be padded with whitespace`},
		{"apparmor empty name", func(p *v1.Pod) {
			csc(p).AppArmorProfile = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: str("")}
		}, `spec.containers[0].securityContext.appArmorProfile.localhostProfile: Required value`},
		{"apparmor type unknown", func(p *v1.Pod) { p.Spec.SecurityContext.AppArmorProfile = &v1.AppArmorProfile{Type: "Strict"} },
			`spec.securityContext.appArmorProfile.type: Unsupported value: "Strict"`},
		{"apparmor annotation for no container", func(p *v1.Pod) {
			p.Annotations[v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+"ghost"] = "runtime/default"
		}, `metadata.annotations[container.apparmor.security.beta.kubernetes.io/ghost]: Invalid value: "ghost": container not found`},
		{"apparmor annotation malformed", func(p *v1.Pod) {
			p.Annotations[v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+"app"] = "x"
		}, `invalid AppArmor profile name: "x"`},
		{"apparmor annotation disagrees", func(p *v1.Pod) {
			p.Annotations[v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+"app"] = "localhost/a"
			p.Spec.SecurityContext.AppArmorProfile = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}
		}, `spec.containers[0].securityContext.appArmorProfile.type: Forbidden: apparmor type in annotation and field must match`},
		{"seLinuxChangePolicy", func(p *v1.Pod) {
			pol := v1.SELinuxChangePolicyMountOption
			p.Spec.SecurityContext.SELinuxChangePolicy = &pol
		}, ""},
		{"seLinuxChangePolicy unknown", func(p *v1.Pod) {
			pol := v1.PodSELinuxChangePolicy("Never")
			p.Spec.SecurityContext.SELinuxChangePolicy = &pol
		}, `spec.securityContext.seLinuxChangePolicy: Unsupported value: "Never"`},
		{"procMount Unmasked with host users", func(p *v1.Pod) { csc(p).ProcMount = &unmasked },
			"spec.containers[0].securityContext.procMount: Invalid value: \"Unmasked\": `hostUsers` must be false to use `Unmasked`"},
		{"procMount Unmasked in an init container", func(p *v1.Pod) {
			p.Spec.InitContainers[0].SecurityContext = &v1.SecurityContext{ProcMount: &unmasked}
			p.Spec.HostUsers = func(b bool) *bool { return &b }(true)
		}, "spec.initContainers[0].securityContext.procMount: Invalid value: \"Unmasked\""},
		{"procMount Unmasked in a user namespace", func(p *v1.Pod) {
			csc(p).ProcMount = &unmasked
			p.Spec.HostUsers = func(b bool) *bool { return &b }(false)
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := goodPod()
			tt.mutate(p)
			errs := ValidateStaticPod(p)
			if tt.want == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs.ToAggregate())
				}
				return
			}
			if len(errs) == 0 {
				t.Fatal("accepted")
			}
			if got := errs.ToAggregate().Error(); !strings.Contains(got, tt.want) {
				t.Fatalf("error %q\ndoes not contain %q", got, tt.want)
			}
		})
	}
}

func TestValidateEphemeralContainerProcMount(t *testing.T) {
	unmasked := v1.UnmaskedProcMount
	p := goodPod()
	p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{
		Name: "debug", Image: "busybox:1", ImagePullPolicy: v1.PullIfNotPresent,
		TerminationMessagePolicy: v1.TerminationMessageReadFile, SecurityContext: &v1.SecurityContext{ProcMount: &unmasked}}}}
	errs := ValidateEphemeralContainers(&p.Spec, nil)
	if got := errs.ToAggregate(); got == nil || !strings.Contains(got.Error(), "[0].securityContext.procMount: Invalid value") {
		t.Fatalf("errors %v", got)
	}
}
