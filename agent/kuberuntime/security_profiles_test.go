package kuberuntime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

func seccomp(t v1.SeccompProfileType, name ...string) *v1.SeccompProfile {
	p := &v1.SeccompProfile{Type: t}
	if len(name) > 0 {
		p.LocalhostProfile = &name[0]
	}
	return p
}

func appArmor(t v1.AppArmorProfileType, name ...string) *v1.AppArmorProfile {
	p := &v1.AppArmorProfile{Type: t}
	if len(name) > 0 {
		p.LocalhostProfile = &name[0]
	}
	return p
}

// securityFor is the container security context the manager sends for the pod's first container.
func securityFor(t *testing.T, m *Manager, pod *v1.Pod) (*runtimeapi.LinuxContainerSecurityContext, error) {
	t.Helper()
	c := &pod.Spec.Containers[0]
	sc := containerSecurityContext(pod, c)
	return sc, m.containerSecurityProfiles(pod, c, sc)
}

func TestSeccompProfileSent(t *testing.T) {
	root := t.TempDir()
	localhost := func(name string) *runtimeapi.SecurityProfile {
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: filepath.Join(root, "seccomp", name)}
	}
	runtimeDefault := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	unconfined := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
	cases := []struct {
		name           string
		pod, container *v1.SeccompProfile
		seccompDefault bool
		annotations    map[string]string
		want           *runtimeapi.SecurityProfile
	}{
		{name: "none", want: unconfined},
		{name: "none with seccompDefault", seccompDefault: true, want: runtimeDefault},
		{name: "pod localhost", pod: seccomp(v1.SeccompProfileTypeLocalhost, "deny-mkdir.json"), want: localhost("deny-mkdir.json")},
		{name: "nested localhost", container: seccomp(v1.SeccompProfileTypeLocalhost, "team/a.json"), want: localhost("team/a.json")},
		{name: "container wins", pod: seccomp(v1.SeccompProfileTypeLocalhost, "pod.json"),
			container: seccomp(v1.SeccompProfileTypeRuntimeDefault), want: runtimeDefault},
		{name: "container unconfined beats seccompDefault", container: seccomp(v1.SeccompProfileTypeUnconfined),
			seccompDefault: true, want: unconfined},
		{name: "pod runtime default", pod: seccomp(v1.SeccompProfileTypeRuntimeDefault), want: runtimeDefault},
		// The kubelet has ignored these annotations since v1.27; the fields decide alone.
		{name: "deprecated annotations ignored", annotations: map[string]string{
			v1.SeccompPodAnnotationKey: "runtime/default", v1.SeccompContainerAnnotationKeyPrefix + "app": "localhost/x.json"}, want: unconfined},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := NewManager(Deps{RootDir: root, SeccompDefault: c.seccompDefault})
			pod := testPod(v1.RestartPolicyAlways, nil, "app")
			pod.Annotations = c.annotations
			pod.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: c.pod}
			pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{SeccompProfile: c.container}
			sc, err := securityFor(t, m, pod)
			if err != nil {
				t.Fatal(err)
			}
			if sc.Seccomp.GetProfileType() != c.want.ProfileType || sc.Seccomp.GetLocalhostRef() != c.want.LocalhostRef {
				t.Fatalf("seccomp %v, want %v", sc.Seccomp, c.want)
			}
			// The sandbox runs RuntimeDefault whatever the pod asks, as with the kubelet.
			cfg, err := m.generatePodSandboxConfig(context.Background(), pod, 0)
			if err != nil {
				t.Fatal(err)
			}
			if p := cfg.Linux.SecurityContext.Seccomp; p.GetProfileType() != runtimeapi.SecurityProfile_RuntimeDefault || p.GetLocalhostRef() != "" {
				t.Fatalf("sandbox seccomp %v", p)
			}
		})
	}
}

// A Localhost name that would leave <root-dir>/seccomp never becomes a path: the container is
// not created and waits in CreateContainerConfigError naming the field.
func TestSeccompLocalhostOutsideTheProfileDirIsRefused(t *testing.T) {
	for i, name := range []string{"../../etc/shadow", "/etc/seccomp.json", "a/../../b.json", `..\x.json`, ""} {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			f := newFixture(t)
			f.cri.AddImage("busybox")
			pod := testPod(v1.RestartPolicyAlways, nil, "app")
			pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{SeccompProfile: seccomp(v1.SeccompProfileTypeLocalhost, name)}
			err := f.sync(pod)
			if !errors.Is(err, kubecontainer.ErrCreateConfig) {
				t.Fatalf("sync: %v, want CreateContainerConfigError", err)
			}
			if got := f.cri.CallsWithPrefix("CreateContainer"); len(got) != 0 {
				t.Fatalf("created: %q", got)
			}
			want := "seccompProfile.localhostProfile"
			if name == "" {
				want = "localhostProfile must be set if seccompProfile type is Localhost."
			}
			if r, _ := f.m.Reasons.Get(pod.UID, "app"); !strings.Contains(r.Message, want) {
				t.Fatalf("waiting message %q lacks %q", r.Message, want)
			}
		})
	}
}

// The profile reaches CreateContainer as an absolute path under the agent's root dir.
func TestSeccompLocalhostReachesTheRuntime(t *testing.T) {
	f := newFixture(t)
	f.cri.AddImage("busybox")
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: seccomp(v1.SeccompProfileTypeLocalhost, "deny-mkdir.json")}
	f.mustSync(pod)
	cfg := f.cri.ContainerConfig(f.cri.RunningContainer("app"))
	p := cfg.GetLinux().GetSecurityContext().GetSeccomp()
	if p.GetProfileType() != runtimeapi.SecurityProfile_Localhost || p.GetLocalhostRef() != filepath.Join(f.m.RootDir, "seccomp", "deny-mkdir.json") {
		t.Fatalf("seccomp sent: %v", p)
	}
	if !filepath.IsAbs(p.GetLocalhostRef()) {
		t.Fatalf("relative profile path %q", p.GetLocalhostRef())
	}
}

func TestAppArmorProfileSent(t *testing.T) {
	cases := []struct {
		name           string
		pod, container *v1.AppArmorProfile
		annotation     string // the container's deprecated annotation, when set
		want           *runtimeapi.SecurityProfile
		wantDeprecated string
	}{
		{name: "none"},
		{name: "pod localhost", pod: appArmor(v1.AppArmorProfileTypeLocalhost, "x"),
			want: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "x"}, wantDeprecated: "localhost/x"},
		{name: "container wins", pod: appArmor(v1.AppArmorProfileTypeLocalhost, "x"), container: appArmor(v1.AppArmorProfileTypeUnconfined),
			want: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, wantDeprecated: "unconfined"},
		{name: "annotation beats the pod field", pod: appArmor(v1.AppArmorProfileTypeUnconfined), annotation: "runtime/default",
			want: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, wantDeprecated: "runtime/default"},
		{name: "annotation localhost", annotation: "localhost/k8s-deny-write",
			want: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "k8s-deny-write"}, wantDeprecated: "localhost/k8s-deny-write"},
		{name: "container field beats annotation", container: appArmor(v1.AppArmorProfileTypeRuntimeDefault), annotation: "unconfined",
			want: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, wantDeprecated: "runtime/default"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := testPod(v1.RestartPolicyAlways, nil, "app")
			pod.Spec.SecurityContext = &v1.PodSecurityContext{AppArmorProfile: c.pod}
			pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{AppArmorProfile: c.container}
			if c.annotation != "" {
				pod.Annotations = map[string]string{v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix + "app": c.annotation}
			}
			sc, err := securityFor(t, NewManager(Deps{RootDir: t.TempDir()}), pod)
			if err != nil {
				t.Fatal(err)
			}
			if (sc.Apparmor == nil) != (c.want == nil) || sc.Apparmor.GetProfileType() != c.want.GetProfileType() ||
				sc.Apparmor.GetLocalhostRef() != c.want.GetLocalhostRef() || sc.ApparmorProfile != c.wantDeprecated {
				t.Fatalf("apparmor %v %q, want %v %q", sc.Apparmor, sc.ApparmorProfile, c.want, c.wantDeprecated)
			}
		})
	}
}

func TestSELinuxOptionsSent(t *testing.T) {
	podOpts := &v1.SELinuxOptions{User: "system_u", Role: "system_r", Type: "container_t", Level: "s0:c1,c2"}
	pod := testPod(v1.RestartPolicyAlways, nil, "app", "own")
	pod.Spec.SecurityContext = &v1.PodSecurityContext{SELinuxOptions: podOpts}
	// The container's options replace the pod's whole: its empty user is not filled from the pod.
	pod.Spec.Containers[1].SecurityContext = &v1.SecurityContext{SELinuxOptions: &v1.SELinuxOptions{Type: "spc_t"}}
	m := NewManager(Deps{RootDir: t.TempDir()})
	want := func(got *runtimeapi.SELinuxOption, o *v1.SELinuxOptions) {
		t.Helper()
		if got.GetUser() != o.User || got.GetRole() != o.Role || got.GetType() != o.Type || got.GetLevel() != o.Level {
			t.Fatalf("selinux %v, want %+v", got, o)
		}
	}
	for i, o := range []*v1.SELinuxOptions{podOpts, {Type: "spc_t"}} {
		c := &pod.Spec.Containers[i]
		sc := containerSecurityContext(pod, c)
		if err := m.containerSecurityProfiles(pod, c, sc); err != nil {
			t.Fatal(err)
		}
		want(sc.SelinuxOptions, o)
	}
	cfg, err := m.generatePodSandboxConfig(context.Background(), pod, 0)
	if err != nil {
		t.Fatal(err)
	}
	want(cfg.Linux.SecurityContext.SelinuxOptions, podOpts)

	plain := testPod(v1.RestartPolicyAlways, nil, "app")
	if sc, err := securityFor(t, m, plain); err != nil || sc.SelinuxOptions != nil {
		t.Fatalf("no options asked, sent %v (%v)", sc.GetSelinuxOptions(), err)
	}
}

func TestProcMountPathsSent(t *testing.T) {
	m := NewManager(Deps{RootDir: t.TempDir()})
	for _, c := range []struct {
		name      string
		procMount *v1.ProcMountType
		privilege bool
		unmasked  bool
	}{
		{name: "unset"},
		{name: "Default", procMount: ptr(v1.DefaultProcMount)},
		{name: "Unmasked", procMount: ptr(v1.UnmaskedProcMount), unmasked: true},
		// The kubelet sends the lists to privileged containers too; the runtime drops them.
		{name: "privileged", privilege: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod := testPod(v1.RestartPolicyAlways, nil, "app")
			pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{ProcMount: c.procMount, Privileged: &c.privilege}
			sc, err := securityFor(t, m, pod)
			if err != nil {
				t.Fatal(err)
			}
			if c.unmasked {
				if len(sc.MaskedPaths) != 0 || len(sc.ReadonlyPaths) != 0 {
					t.Fatalf("Unmasked sent masked %q read-only %q", sc.MaskedPaths, sc.ReadonlyPaths)
				}
				return
			}
			for _, p := range []string{"/proc/kcore", "/proc/interrupts", "/sys/firmware"} {
				if !slices.Contains(sc.MaskedPaths, p) {
					t.Errorf("%s not masked: %q", p, sc.MaskedPaths)
				}
			}
			if !slices.Equal(sc.ReadonlyPaths, defaultReadonlyPaths) {
				t.Errorf("read-only %q", sc.ReadonlyPaths)
			}
		})
	}
}

func TestThermalThrottlePaths(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"cpu10/thermal_throttle", "cpu2/thermal_throttle", "cpu3", "cpufreq/thermal_throttle"} {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{filepath.Join(dir, "cpu2/thermal_throttle"), filepath.Join(dir, "cpu10/thermal_throttle")}
	if got := thermalThrottlePaths(dir); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func ptr[T any](v T) *T { return &v }
