package cri_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// runToLog runs cfg to completion and returns its status and log.
func runToLog(t *testing.T, e *runtimetest.Env, sb string, pod *runtimeapi.PodSandboxConfig, cfg *runtimeapi.ContainerConfig) (*runtimeapi.ContainerStatus, string) {
	t.Helper()
	id := e.RunContainer(sb, pod, cfg)
	st := e.WaitContainerState(id, runtimeapi.ContainerState_CONTAINER_EXITED)
	log := e.WaitLog(st.LogPath, "END")
	return st, log
}

func TestContainerSecurityContext(t *testing.T) {
	for _, handler := range []string{"runc", "crun"} {
		t.Run(handler, func(t *testing.T) {
			e := runtimetest.Start(t)
			pod := e.PodWithLogs("sec-" + handler)
			sb := e.RunPod(pod, handler)

			t.Run("user", func(t *testing.T) {
				cfg := runtimetest.ContainerConfig("user", "sh", "-c", "id; echo END")
				cfg.Linux.SecurityContext.RunAsUser = &runtimeapi.Int64Value{Value: 1000}
				cfg.Linux.SecurityContext.SupplementalGroups = []int64{3000}
				st, log := runToLog(t, e, sb, pod, cfg)
				if u := st.GetUser().GetLinux(); u.GetUid() != 1000 || u.GetGid() != 1000 || len(u.GetSupplementalGroups()) != 3 { // 1000 itself, 2000 from /etc/group, 3000 asked
					t.Errorf("status user: %v", u)
				}
				for _, want := range []string{"uid=1000", "gid=1000", "2000", "3000"} {
					if !strings.Contains(log, want) {
						t.Errorf("id output lacks %q:\n%s", want, log)
					}
				}
			})
			t.Run("username", func(t *testing.T) {
				cfg := runtimetest.ContainerConfig("username", "sh", "-c", "id -u; echo END")
				cfg.Linux.SecurityContext.RunAsUsername = "nobody"
				_, log := runToLog(t, e, sb, pod, cfg)
				if !strings.Contains(log, "F 65534") {
					t.Errorf("nobody's uid not in:\n%s", log)
				}
			})
			t.Run("capabilities", func(t *testing.T) {
				cfg := runtimetest.ContainerConfig("caps", "sh", "-c", "grep -E '^Cap(Eff|Bnd)' /proc/self/status; echo END")
				cfg.Linux.SecurityContext.Capabilities = &runtimeapi.Capability{DropCapabilities: []string{"ALL"}, AddCapabilities: []string{"NET_BIND_SERVICE"}}
				_, log := runToLog(t, e, sb, pod, cfg)
				if !strings.Contains(log, "CapEff:\t0000000000000400") || !strings.Contains(log, "CapBnd:\t0000000000000400") {
					t.Errorf("caps:\n%s", log)
				}
				cfg = runtimetest.ContainerConfig("defcaps", "sh", "-c", "grep CapBnd /proc/self/status; echo END")
				_, log = runToLog(t, e, sb, pod, cfg)
				if !strings.Contains(log, "CapBnd:\t00000000a80425fb") {
					t.Errorf("default caps:\n%s", log)
				}
			})
			t.Run("readonly-rootfs-nonewprivs-seccomp", func(t *testing.T) {
				cfg := runtimetest.ContainerConfig("ro", "sh", "-c",
					"touch /x && echo WROTE; grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status; "+
						"busybox unshare -U true && echo USERNS; busybox unshare -n true && echo NETNS; echo END")
				cfg.Linux.SecurityContext.ReadonlyRootfs = true
				cfg.Linux.SecurityContext.NoNewPrivs = true
				cfg.Linux.SecurityContext.Seccomp = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
				_, log := runToLog(t, e, sb, pod, cfg)
				if strings.Contains(log, "WROTE") {
					t.Errorf("wrote to a read-only rootfs:\n%s", log)
				}
				if !strings.Contains(log, "NoNewPrivs:\t1") || !strings.Contains(log, "Seccomp:\t2") {
					t.Errorf("no_new_privs/seccomp not in force:\n%s", log)
				}
				if strings.Contains(log, "USERNS") || strings.Contains(log, "NETNS") {
					t.Errorf("made namespaces under RuntimeDefault:\n%s", log)
				}
			})
			t.Run("masked-paths", func(t *testing.T) {
				cfg := runtimetest.ContainerConfig("masked", "sh", "-c", "wc -c < /proc/keys; echo x > /proc/sys/kernel/domainname || echo RO; echo END")
				_, log := runToLog(t, e, sb, pod, cfg)
				if !strings.Contains(log, "F 0") || !strings.Contains(log, "RO") {
					t.Errorf("masked/readonly paths not in force:\n%s", log)
				}
			})
			t.Run("devices", func(t *testing.T) {
				cfg := runtimetest.ContainerConfig("devices", "sh", "-c", "echo x > /dev/xnull && echo DEVOK; cat /dev/xnull; echo END")
				cfg.Devices = []*runtimeapi.Device{{ContainerPath: "/dev/xnull", HostPath: "/dev/null", Permissions: "rw"}}
				_, log := runToLog(t, e, sb, pod, cfg)
				if !strings.Contains(log, "DEVOK") {
					t.Errorf("device:\n%s", log)
				}
			})
			t.Run("mounts", func(t *testing.T) {
				host := t.TempDir()
				// A submount, which only a recursive read-only mount makes read-only too.
				sub := filepath.Join(host, "sub")
				if err := os.Mkdir(sub, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { unix.Unmount(sub, unix.MNT_DETACH) })
				cfg := runtimetest.ContainerConfig("mounts", "sh", "-c",
					"echo hi > /data/rw/f && cat /data/rw/f; echo x > /data/ro/f || echo RO; echo x > /data/ro/sub/f || echo SUBRO; echo END")
				cfg.Mounts = []*runtimeapi.Mount{
					{ContainerPath: "/data/rw", HostPath: host},
					{ContainerPath: "/data/ro", HostPath: host, Readonly: true, RecursiveReadOnly: true},
				}
				_, log := runToLog(t, e, sb, pod, cfg)
				if !strings.Contains(log, "F hi") || !strings.Contains(log, "RO") || !strings.Contains(log, "SUBRO") {
					t.Errorf("mounts:\n%s", log)
				}
			})
		})
	}
}
