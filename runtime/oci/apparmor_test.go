package oci

import (
	"errors"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

func appArmorSC(t runtimeapi.SecurityProfile_ProfileType, ref string) *runtimeapi.LinuxContainerSecurityContext {
	return &runtimeapi.LinuxContainerSecurityContext{Apparmor: &runtimeapi.SecurityProfile{ProfileType: t, LocalhostRef: ref}}
}

// Without AppArmor in the kernel, only "none" and unconfined are possible: anything else would run
// the container with less confinement than asked, so it is refused.
func TestAppArmorWhereTheKernelHasNone(t *testing.T) {
	lsm := &fakeModules{}
	for _, c := range []struct {
		name string
		sc   *runtimeapi.LinuxContainerSecurityContext
		ok   bool
	}{
		{name: "none asked", sc: &runtimeapi.LinuxContainerSecurityContext{}, ok: true},
		{name: "unconfined", sc: appArmorSC(runtimeapi.SecurityProfile_Unconfined, ""), ok: true},
		{name: "deprecated unconfined", sc: &runtimeapi.LinuxContainerSecurityContext{ApparmorProfile: "unconfined"}, ok: true},
		{name: "runtime default", sc: appArmorSC(runtimeapi.SecurityProfile_RuntimeDefault, "")},
		{name: "localhost", sc: appArmorSC(runtimeapi.SecurityProfile_Localhost, "x")},
		{name: "deprecated localhost", sc: &runtimeapi.LinuxContainerSecurityContext{ApparmorProfile: "localhost/x"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := appArmorFor(c.sc, false, lsm)
			if c.ok {
				if err != nil || got != "" {
					t.Fatalf("got %q, %v; want no profile", got, err)
				}
				return
			}
			if !errors.Is(err, errdefs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "apparmor is not supported") {
				t.Fatalf("got %q, %v; want refused", got, err)
			}
		})
	}
}

func TestAppArmorWhereTheKernelEnforcesIt(t *testing.T) {
	for _, c := range []struct {
		name       string
		sc         *runtimeapi.LinuxContainerSecurityContext
		privileged bool
		want       string
		wantErr    error
		wantMsg    string
	}{
		// As containerd: no profile asked is the runtime's default.
		{name: "none asked", sc: &runtimeapi.LinuxContainerSecurityContext{}, want: DefaultAppArmorProfile},
		{name: "runtime default", sc: appArmorSC(runtimeapi.SecurityProfile_RuntimeDefault, ""), want: DefaultAppArmorProfile},
		{name: "deprecated runtime default", sc: &runtimeapi.LinuxContainerSecurityContext{ApparmorProfile: "runtime/default"}, want: DefaultAppArmorProfile},
		{name: "privileged runtime default", sc: appArmorSC(runtimeapi.SecurityProfile_RuntimeDefault, ""), privileged: true, want: ""},
		{name: "unconfined", sc: appArmorSC(runtimeapi.SecurityProfile_Unconfined, ""), want: ""},
		{name: "localhost loaded", sc: appArmorSC(runtimeapi.SecurityProfile_Localhost, "k8s-deny-write"), want: "k8s-deny-write"},
		{name: "localhost with prefix", sc: appArmorSC(runtimeapi.SecurityProfile_Localhost, "localhost/k8s-deny-write"), want: "k8s-deny-write"},
		{name: "deprecated localhost", sc: &runtimeapi.LinuxContainerSecurityContext{ApparmorProfile: "localhost/k8s-deny-write"}, want: "k8s-deny-write"},
		{name: "localhost not loaded", sc: appArmorSC(runtimeapi.SecurityProfile_Localhost, "x"),
			wantErr: errdefs.ErrFailedPrecondition, wantMsg: "apparmor profile not found x"},
		{name: "localhost without a name", sc: appArmorSC(runtimeapi.SecurityProfile_Localhost, " "), wantErr: errdefs.ErrInvalidArgument},
		{name: "name on another type", sc: appArmorSC(runtimeapi.SecurityProfile_RuntimeDefault, "x"), wantErr: errdefs.ErrInvalidArgument},
		{name: "deprecated form unknown", sc: &runtimeapi.LinuxContainerSecurityContext{ApparmorProfile: "x"}, wantErr: errdefs.ErrInvalidArgument},
	} {
		t.Run(c.name, func(t *testing.T) {
			lsm := &fakeModules{appArmor: true, loaded: map[string]bool{"k8s-deny-write": true}}
			got, err := appArmorFor(c.sc, c.privileged, lsm)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) || !strings.Contains(err.Error(), c.wantMsg) {
					t.Fatalf("got %q, %v; want %v %q", got, err, c.wantErr, c.wantMsg)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %q, %v; want %q", got, err, c.want)
			}
			if wantLoads := map[bool]int{true: 1, false: 0}[c.want == DefaultAppArmorProfile]; lsm.loads != wantLoads {
				t.Fatalf("default profile loaded %d times, want %d", lsm.loads, wantLoads)
			}
		})
	}
}

// The default profile is loaded once, then found loaded; a failed load fails the container.
func TestDefaultAppArmorProfileLoad(t *testing.T) {
	lsm := &fakeModules{appArmor: true}
	for range 3 {
		if p, err := appArmorFor(&runtimeapi.LinuxContainerSecurityContext{}, false, lsm); err != nil || p != DefaultAppArmorProfile {
			t.Fatalf("got %q, %v", p, err)
		}
	}
	if lsm.loads != 1 || !strings.Contains(lsm.policies[0], "profile "+DefaultAppArmorProfile+" ") ||
		strings.Count(lsm.policies[0], "{") != strings.Count(lsm.policies[0], "}") {
		t.Fatalf("loads %d, policy:\n%s", lsm.loads, strings.Join(lsm.policies, "\n"))
	}
	failing := &fakeModules{appArmor: true, loadErr: errFake}
	if _, err := appArmorFor(&runtimeapi.LinuxContainerSecurityContext{}, false, failing); !errors.Is(err, errFake) {
		t.Fatalf("load failure: %v", err)
	}
}

func TestAppArmorProfileList(t *testing.T) {
	list := "docker-default (enforce)\n/usr/bin/man (enforce)\nk8s-deny-write (complain)\nk8s-deny-write-2 (enforce)\n"
	for name, want := range map[string]bool{"k8s-deny-write": true, "/usr/bin/man": true, "k8s-deny": false, "docker": false, "": false} {
		if got, err := profileListed(strings.NewReader(list), name); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", name, got, err, want)
		}
	}
}

func TestGenerateSetsAppArmorProfile(t *testing.T) {
	in := baseInput(t)
	in.LSM = &fakeModules{appArmor: true, loaded: map[string]bool{"x": true}}
	in.Config.Linux.SecurityContext.Apparmor = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "x"}
	s, err := Generate(in)
	if err != nil {
		t.Fatal(err)
	}
	if s.Process.ApparmorProfile != "x" {
		t.Fatalf("apparmor profile %q", s.Process.ApparmorProfile)
	}
	in.LSM = &fakeModules{}
	if _, err := Generate(in); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("without AppArmor: %v", err)
	}
}
