package oci

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

func seLinuxHost() *fakeModules {
	return &fakeModules{selinux: true, process: "system_u:system_r:container_t:s0", file: "system_u:object_r:container_file_t:s0"}
}

// seLinuxInput is a container of a pod whose folder sits beside other pods' folders.
func seLinuxInput(t *testing.T, podsDir, pod string, ctr, sandbox *runtimeapi.SELinuxOption) SpecInput {
	t.Helper()
	dir := filepath.Join(podsDir, pod)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return SpecInput{SandboxDir: dir,
		Config: &runtimeapi.ContainerConfig{Linux: &runtimeapi.LinuxContainerConfig{
			SecurityContext: &runtimeapi.LinuxContainerSecurityContext{SelinuxOptions: ctr}}},
		Sandbox: &runtimeapi.PodSandboxConfig{Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{SelinuxOptions: sandbox}}}}
}

// Where the kernel runs no SELinux the options are ignored, as containerd ignores them; a level of
// the wrong form is refused on every host.
func TestSELinuxWhereTheKernelHasNone(t *testing.T) {
	pods := t.TempDir()
	in := seLinuxInput(t, pods, "p", &runtimeapi.SELinuxOption{User: "u", Role: "r", Type: "t:forged", Level: "s0:c1,c2"}, nil)
	p, m, err := seLinuxLabels(in, false, &fakeModules{})
	if err != nil || p != "" || m != "" {
		t.Fatalf("labels %q %q, %v; want none", p, m, err)
	}
	in = seLinuxInput(t, pods, "q", &runtimeapi.SELinuxOption{Level: "high"}, nil)
	if _, _, err := seLinuxLabels(in, false, &fakeModules{}); !errors.Is(err, errdefs.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), `the format of 'level' "high" is not correct`) {
		t.Fatalf("bad level: %v", err)
	}
	if _, err := os.Stat(filepath.Join(pods, "p", seLinuxLevelFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a level was kept without SELinux: %v", err)
	}
}

func TestSELinuxWhereTheKernelRunsIt(t *testing.T) {
	pods := t.TempDir()
	lsm := seLinuxHost()
	for _, c := range []struct {
		name             string
		ctr, sandbox     *runtimeapi.SELinuxOption
		privileged       bool
		wantProc, wantMt string
	}{
		{name: "container options", ctr: &runtimeapi.SELinuxOption{Type: "spc_t", Level: "s0:c1,c2"},
			wantProc: "system_u:system_r:spc_t:s0:c1,c2", wantMt: "system_u:object_r:container_file_t:s0:c1,c2"},
		{name: "all four", ctr: &runtimeapi.SELinuxOption{User: "user_u", Role: "user_r", Type: "user_t", Level: "s0-s0:c0.c1023"},
			wantProc: "user_u:user_r:user_t:s0-s0:c0.c1023", wantMt: "user_u:object_r:container_file_t:s0-s0:c0.c1023"},
		{name: "pod options when the container has none", sandbox: &runtimeapi.SELinuxOption{Level: "s0:c5,c6"},
			wantProc: "system_u:system_r:container_t:s0:c5,c6", wantMt: "system_u:object_r:container_file_t:s0:c5,c6"},
		{name: "pod level under container type", ctr: &runtimeapi.SELinuxOption{Type: "spc_t"}, sandbox: &runtimeapi.SELinuxOption{Level: "s0:c5,c6"},
			wantProc: "system_u:system_r:spc_t:s0:c5,c6", wantMt: "system_u:object_r:container_file_t:s0:c5,c6"},
		{name: "privileged keeps the runtime's label", ctr: &runtimeapi.SELinuxOption{Level: "s0:c1,c2"}, privileged: true,
			wantProc: "", wantMt: "system_u:object_r:container_file_t:s0:c1,c2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := seLinuxInput(t, pods, "pod", c.ctr, c.sandbox)
			p, m, err := seLinuxLabels(in, c.privileged, lsm)
			if err != nil || p != c.wantProc || m != c.wantMt {
				t.Fatalf("labels %q %q, %v; want %q %q", p, m, err, c.wantProc, c.wantMt)
			}
		})
	}
	if _, _, err := seLinuxLabels(seLinuxInput(t, pods, "bad", &runtimeapi.SELinuxOption{Type: "t:s0:c1,c2"}, nil), false, lsm); !errors.Is(err, errdefs.ErrInvalidArgument) {
		t.Fatalf("a type forging a level: %v", err)
	}
	failing := seLinuxHost()
	failing.contextsErr = errFake
	if _, _, err := seLinuxLabels(seLinuxInput(t, pods, "p", nil, nil), false, failing); !errors.Is(err, errFake) {
		t.Fatalf("no container contexts: %v", err)
	}
}

// A pod that names no level gets one of its own, kept in its folder: its containers share it,
// before and after a daemon restart, and another pod gets another.
func TestSELinuxPodLevel(t *testing.T) {
	pods := t.TempDir()
	lsm := seLinuxHost()
	label := func(pod string) string {
		t.Helper()
		p, _, err := seLinuxLabels(seLinuxInput(t, pods, pod, nil, nil), false, lsm)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	first := label("a")
	if !strings.HasPrefix(first, "system_u:system_r:container_t:s0:c") || first == "system_u:system_r:container_t:s0" {
		t.Fatalf("label %q has no MCS level of its own", first)
	}
	if again := label("a"); again != first {
		t.Fatalf("second container %q, first %q", again, first)
	}
	kept, err := os.ReadFile(filepath.Join(pods, "a", seLinuxLevelFile))
	if err != nil || !strings.HasSuffix(first, ":"+string(kept)) {
		t.Fatalf("kept level %q (%v), label %q", kept, err, first)
	}
	seen := map[string]bool{first: true}
	for _, pod := range []string{"b", "c", "d", "e"} {
		l := label(pod)
		if seen[l] {
			t.Fatalf("pod %s got a level another pod holds: %q", pod, l)
		}
		seen[l] = true
	}
	// A level file that holds no level is an error, not a reason to draw another.
	if err := os.WriteFile(filepath.Join(pods, "a", seLinuxLevelFile), []byte("not a level"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := seLinuxLabels(seLinuxInput(t, pods, "a", nil, nil), false, lsm); !errors.Is(err, errdefs.ErrFailedPrecondition) {
		t.Fatalf("a damaged level file: %v", err)
	}
}

func TestGenerateSetsSELinuxLabels(t *testing.T) {
	in := baseInput(t)
	in.SandboxDir = filepath.Join(t.TempDir(), "pod")
	in.LSM = seLinuxHost()
	in.Config.Linux.SecurityContext.SelinuxOptions = &runtimeapi.SELinuxOption{Level: "s0:c7,c8"}
	s, err := Generate(in)
	if err != nil {
		t.Fatal(err)
	}
	if s.Process.SelinuxLabel != "system_u:system_r:container_t:s0:c7,c8" || s.Linux.MountLabel != "system_u:object_r:container_file_t:s0:c7,c8" {
		t.Fatalf("labels %q %q", s.Process.SelinuxLabel, s.Linux.MountLabel)
	}
	in.LSM = &fakeModules{}
	if s, err = Generate(in); err != nil || s.Process.SelinuxLabel != "" || s.Linux.MountLabel != "" {
		t.Fatalf("without SELinux: %q %q %v", s.Process.SelinuxLabel, s.Linux.MountLabel, err)
	}
}

func TestSELinuxConfigValue(t *testing.T) {
	cfg := "# comment\nSELINUX=enforcing\nSELINUXTYPE=targeted\n"
	lxc := "process = \"system_u:system_r:container_t:s0\"\ncontent = \"system_u:object_r:virt_var_lib_t:s0\"\nfile = \"system_u:object_r:container_file_t:s0\"\n"
	if v := selinuxConfigValue(cfg, "SELINUXTYPE"); v != "targeted" {
		t.Errorf("SELINUXTYPE %q", v)
	}
	if p, f := selinuxConfigValue(lxc, "process"), selinuxConfigValue(lxc, "file"); p != "system_u:system_r:container_t:s0" || f != "system_u:object_r:container_file_t:s0" {
		t.Errorf("process %q file %q", p, f)
	}
}
