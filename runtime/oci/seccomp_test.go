package oci

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
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

// A Localhost profile is read as a regular file of bounded size: a FIFO in its place fails at
// once instead of holding the request, a device is not opened, and a missing file is reported in
// containerd's words.
func TestLocalhostSeccompReadSafely(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("deny-mkdir.json", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["mkdir","mkdirat"],"action":"SCMP_ACT_ERRNO","errnoRet":1}]}`)
	link := filepath.Join(dir, "link.json")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.json")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.json")
	for _, c := range []struct {
		name    string
		ref     string
		wantErr error
		wantMsg string
	}{
		{name: "profile", ref: good},
		{name: "symlink to a profile", ref: link},
		{name: "missing", ref: missing, wantErr: errdefs.ErrFailedPrecondition,
			wantMsg: `cannot load seccomp profile "` + missing + `": open ` + missing + `: no such file or directory`},
		{name: "FIFO", ref: fifo, wantErr: errdefs.ErrInvalidArgument, wantMsg: "not a regular file: a named pipe (FIFO)"},
		{name: "device", ref: "/dev/zero", wantErr: errdefs.ErrInvalidArgument, wantMsg: "not a regular file: a character device"},
		{name: "directory", ref: dir, wantErr: errdefs.ErrInvalidArgument, wantMsg: "not a regular file: a directory"},
		{name: "too large", ref: write("big.json", `{"defaultAction":"SCMP_ACT_ALLOW","x":"`+strings.Repeat("a", maxSeccompProfileSize)+`"}`),
			wantErr: errdefs.ErrInvalidArgument, wantMsg: "too large"},
		{name: "not JSON", ref: write("bad.json", "defaultAction: allow"), wantErr: errdefs.ErrInvalidArgument, wantMsg: "decoding seccomp profile failed"},
		{name: "no default action", ref: write("empty.json", "{}"), wantErr: errdefs.ErrInvalidArgument, wantMsg: "no defaultAction"},
		{name: "relative", ref: "deny-mkdir.json", wantErr: errdefs.ErrInvalidArgument, wantMsg: "must be an absolute path"},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := &runtimeapi.LinuxContainerSecurityContext{Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: c.ref}}
			s, err := seccompFor(sc, false)
			if c.wantErr == nil {
				if err != nil || s.DefaultAction != specs.ActAllow || !deniesCall(s, "mkdir") {
					t.Fatalf("profile %+v, %v", s, err)
				}
				return
			}
			if !errors.Is(err, c.wantErr) || !strings.Contains(err.Error(), c.wantMsg) {
				t.Fatalf("error %v; want %v containing %q", err, c.wantErr, c.wantMsg)
			}
		})
	}
	// Only a Localhost profile names a file.
	sc := &runtimeapi.LinuxContainerSecurityContext{Seccomp: &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault, LocalhostRef: good}}
	if _, err := seccompFor(sc, false); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("RuntimeDefault with a file: %v", err)
	}
}
