package oci

import (
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// deniesCall reports whether the profile makes call fail unconditionally; a nil profile is
// unconfined and denies nothing.
func deniesCall(s *specs.LinuxSeccomp, call string) bool {
	if s == nil {
		return false
	}
	for _, r := range s.Syscalls {
		if r.Action == specs.ActErrno && len(r.Args) == 0 && contains(r.Names, call) {
			return true
		}
	}
	return false
}

func TestSeccompIOUring(t *testing.T) {
	profile := func(pt runtimeapi.SecurityProfile_ProfileType, caps ...string) *runtimeapi.LinuxContainerSecurityContext {
		return &runtimeapi.LinuxContainerSecurityContext{
			Seccomp:      &runtimeapi.SecurityProfile{ProfileType: pt},
			Capabilities: &runtimeapi.Capability{AddCapabilities: caps},
		}
	}
	tests := []struct {
		name       string
		sc         *runtimeapi.LinuxContainerSecurityContext
		privileged bool
		denied     bool
	}{
		{name: "runtime default", sc: profile(runtimeapi.SecurityProfile_RuntimeDefault), denied: true},
		{name: "runtime default with CAP_SYS_ADMIN", sc: profile(runtimeapi.SecurityProfile_RuntimeDefault, "SYS_ADMIN"), denied: true},
		{name: "runtime default with ALL", sc: profile(runtimeapi.SecurityProfile_RuntimeDefault, "ALL"), denied: true},
		{name: "legacy runtime/default path", sc: &runtimeapi.LinuxContainerSecurityContext{SeccompProfilePath: "runtime/default"}, denied: true},
		{name: "unconfined", sc: profile(runtimeapi.SecurityProfile_Unconfined), denied: false},
		{name: "unset", sc: &runtimeapi.LinuxContainerSecurityContext{}, denied: false},
		{name: "privileged", sc: profile(runtimeapi.SecurityProfile_RuntimeDefault), privileged: true, denied: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := seccompFor(tt.sc, tt.privileged)
			if err != nil {
				t.Fatal(err)
			}
			for _, call := range []string{"io_uring_setup", "io_uring_enter", "io_uring_register"} {
				if got := deniesCall(s, call); got != tt.denied {
					t.Errorf("%s denied = %v, want %v", call, got, tt.denied)
				}
			}
		})
	}
}
