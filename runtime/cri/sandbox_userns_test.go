package cri_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

func usernsPod(e *runtimetest.Env, name string, hostID uint32) *runtimeapi.PodSandboxConfig {
	pod := withNamespaces(e.PodWithLogs(name), runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD)
	m := []*runtimeapi.IDMapping{{ContainerId: 0, HostId: hostID, Length: 65536}}
	pod.Linux.SecurityContext.NamespaceOptions.UsernsOptions = &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD, Uids: m, Gids: m}
	return pod
}

func usernsFeature(t *testing.T, e *runtimetest.Env) map[string]bool {
	t.Helper()
	resp, err := e.Runtime.Status(e.Ctx(), &runtimeapi.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, h := range resp.GetRuntimeHandlers() {
		out[h.GetName()] = h.GetFeatures().GetUserNamespaces()
	}
	return out
}

// makeSearchable gives the test's private temp dirs o+x, as a mapped root must reach the rootfs.
func makeSearchable(t *testing.T, dir string) {
	t.Helper()
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPodUserNamespace runs a pod in its own user namespace (mode POD, ids 0-65535 mapped to
// 200000-265535): its containers see the mapping, are root inside it, own their idmapped rootfs
// (image files of host uid 0 are their uid 0, and they can write /), run as the mapped ids on the
// host, and the pod's pins, idmapped mounts and processes are gone after removal.
func TestPodUserNamespace(t *testing.T) {
	for _, handler := range []string{"runc", "crun"} {
		t.Run(handler, func(t *testing.T) {
			e := runtimetest.Start(t)
			// Under the private temp dir a mapped root cannot reach its rootfs: neither advertised
			// nor accepted.
			if f := usernsFeature(t, e); f[handler] {
				t.Fatalf("user namespaces advertised with a private root: %v", f)
			}
			_, err := e.Runtime.RunPodSandbox(e.Ctx(), &runtimeapi.RunPodSandboxRequest{Config: usernsPod(e, "private", 200000), RuntimeHandler: handler})
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("userns pod under a private root: %v, want InvalidArgument", err)
			}
			makeSearchable(t, e.Dir)
			f := usernsFeature(t, e)
			if !f[handler] || !f[""] || f["runsc"] {
				t.Fatalf("user namespaces features = %v: want runc, crun and the default, not runsc", f)
			}

			pod := usernsPod(e, "userns", 200000)
			pod.Hostname = "userns-host"
			pod.Linux.Sysctls = map[string]string{"net.ipv4.ip_unprivileged_port_start": "99"}
			sb := e.RunPod(pod, handler)
			_, info := podStatus(t, e, sb)
			if info.UserNSPath == "" {
				t.Fatal("no user namespace pin in the sandbox status")
			}
			c1 := e.RunContainer(sb, pod, runtimetest.ContainerConfig("one", "sleep", "1000"))
			c2 := e.RunContainer(sb, pod, runtimetest.ContainerConfig("two", "sleep", "1001"))
			exec := func(id string, cmd ...string) string {
				t.Helper()
				resp, err := e.Runtime.ExecSync(e.Ctx(), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: 60})
				if err != nil || resp.ExitCode != 0 {
					t.Fatalf("exec %v: %v, %v (stderr %q)", cmd, err, resp.GetExitCode(), resp.GetStderr())
				}
				return strings.TrimSpace(string(resp.Stdout))
			}
			for _, f := range []string{"/proc/self/uid_map", "/proc/self/gid_map"} {
				if got := strings.Fields(exec(c1, "cat", f)); strings.Join(got, " ") != "0 200000 65536" {
					t.Errorf("%s in container = %q", f, got)
				}
			}
			if got := exec(c1, "id", "-u"); got != "0" {
				t.Errorf("uid in container = %q", got)
			}
			if got := exec(c1, "stat", "-c", "%u:%g", "/bin", "/"); got != "0:0\n0:0" {
				t.Errorf("rootfs owners in container = %q, want 0:0 (idmapped)", got)
			}
			exec(c1, "sh", "-c", "echo hi > /etc/written && touch /new")
			if got := exec(c1, "hostname"); got != "userns-host" {
				t.Errorf("hostname = %q", got)
			}
			if got := exec(c2, "cat", "/proc/sys/net/ipv4/ip_unprivileged_port_start"); got != "99" {
				t.Errorf("sysctl = %q", got)
			}
			if got := exec(c2, "ps"); !strings.Contains(got, "sleep 1000") {
				t.Errorf("containers do not share the pod's PID namespace:\n%s", got)
			}
			// Both containers are in the pod's user namespace, not the host's.
			hostNS, err := os.Readlink("/proc/self/ns/user")
			if err != nil {
				t.Fatal(err)
			}
			ns1, ns2 := exec(c1, "readlink", "/proc/self/ns/user"), exec(c2, "readlink", "/proc/self/ns/user")
			if ns1 != ns2 || ns1 == hostNS {
				t.Errorf("user namespaces: %s and %s (host %s)", ns1, ns2, hostNS)
			}

			// A daemon restart keeps the pod: its user namespace pin is recorded and checked, and a
			// container created afterwards joins the same namespace.
			e.Restart()
			if st, _ := podStatus(t, e, sb); st.State != runtimeapi.PodSandboxState_SANDBOX_READY {
				t.Fatalf("after restart the pod is %v", st.State)
			}
			c3 := e.RunContainer(sb, pod, runtimetest.ContainerConfig("three", "sleep", "1002"))
			if ns3 := exec(c3, "readlink", "/proc/self/ns/user"); ns3 != ns1 {
				t.Errorf("container made after a restart is in user namespace %s, want %s", ns3, ns1)
			}

			if _, err := e.Runtime.StopPodSandbox(e.Ctx(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.Runtime.RemovePodSandbox(e.Ctx(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
				t.Fatal(err)
			}
			assertGone(t, e, info)
		})
	}
}

// TestPodUserNamespaceRefused checks the requests a pod's user namespace cannot take.
func TestPodUserNamespaceRefused(t *testing.T) {
	e := runtimetest.Start(t)
	makeSearchable(t, e.Dir)
	two := []*runtimeapi.IDMapping{{ContainerId: 0, HostId: 200000, Length: 10}, {ContainerId: 10, HostId: 300000, Length: 10}}
	cases := map[string]func(*runtimeapi.PodSandboxConfig) string{
		"mode CONTAINER": func(p *runtimeapi.PodSandboxConfig) string {
			p.Linux.SecurityContext.NamespaceOptions.UsernsOptions = &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_CONTAINER}
			return ""
		},
		"mode TARGET": func(p *runtimeapi.PodSandboxConfig) string {
			p.Linux.SecurityContext.NamespaceOptions.UsernsOptions = &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_TARGET}
			return ""
		},
		"two mappings": func(p *runtimeapi.PodSandboxConfig) string {
			p.Linux.SecurityContext.NamespaceOptions.UsernsOptions.Uids = two
			return ""
		},
		"root unmapped": func(p *runtimeapi.PodSandboxConfig) string {
			p.Linux.SecurityContext.NamespaceOptions.UsernsOptions.Gids = []*runtimeapi.IDMapping{{ContainerId: 1, HostId: 200000, Length: 10}}
			return ""
		},
		"host network": func(p *runtimeapi.PodSandboxConfig) string {
			p.Linux.SecurityContext.NamespaceOptions.Network = runtimeapi.NamespaceMode_NODE
			return ""
		},
		"host pid": func(p *runtimeapi.PodSandboxConfig) string {
			p.Linux.SecurityContext.NamespaceOptions.Pid = runtimeapi.NamespaceMode_NODE
			return ""
		},
		"runsc": func(p *runtimeapi.PodSandboxConfig) string { return "runsc" },
	}
	for name, mutate := range cases {
		pod := usernsPod(e, "refused", 200000)
		handler := mutate(pod)
		_, err := e.Runtime.RunPodSandbox(e.Ctx(), &runtimeapi.RunPodSandboxRequest{Config: pod, RuntimeHandler: handler})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want InvalidArgument", name, errors.Unwrap(err))
		}
	}
}
