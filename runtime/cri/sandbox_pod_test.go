package cri_test

import (
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// TestSandboxContainersShareThePod checks the sandbox from inside its containers: they see the
// pod's hostname, DNS, sysctls, /dev/shm and one PID namespace whose init is catatonit, and
// StopPodSandbox/RemovePodSandbox take the containers with them.
func TestSandboxContainersShareThePod(t *testing.T) {
	for _, handler := range []string{"runc", "crun"} {
		t.Run(handler, func(t *testing.T) {
			e := runtimetest.Start(t)
			pod := withNamespaces(e.PodWithLogs("together"), runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD)
			pod.Hostname = "together-host"
			pod.DnsConfig = &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"ns.svc"}}
			pod.Linux.Sysctls = map[string]string{"kernel.shmmni": "1234", "net.ipv4.ip_unprivileged_port_start": "77"}
			sb := e.RunPod(pod, handler)
			_, info := podStatus(t, e, sb)
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
			if got := exec(c1, "hostname"); got != "together-host" {
				t.Errorf("hostname in container = %q", got)
			}
			if got := exec(c1, "cat", "/etc/resolv.conf"); !strings.Contains(got, "nameserver 10.96.0.10") || !strings.Contains(got, "search ns.svc") {
				t.Errorf("resolv.conf in container = %q", got)
			}
			if got := exec(c2, "cat", "/proc/sys/kernel/shmmni", "/proc/sys/net/ipv4/ip_unprivileged_port_start"); got != "1234\n77" {
				t.Errorf("sysctls in container = %q", got)
			}
			if got := exec(c1, "cat", "/proc/1/cmdline"); !strings.Contains(got, "catatonit") {
				t.Errorf("pid 1 in container runs %q, want catatonit", got)
			}
			if got := exec(c2, "ps"); !strings.Contains(got, "sleep 1000") {
				t.Errorf("container two does not see container one's process:\n%s", got)
			}
			exec(c1, "sh", "-c", "echo hi > /dev/shm/note")
			if got := exec(c2, "cat", "/dev/shm/note"); got != "hi" {
				t.Errorf("/dev/shm not shared: %q", got)
			}

			if _, err := e.Runtime.StopPodSandbox(e.Ctx(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{c1, c2} {
				if st := e.Status(id); st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
					t.Errorf("after StopPodSandbox container %s is %v", id, st.State)
				}
			}
			if _, err := e.Runtime.RemovePodSandbox(e.Ctx(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
				t.Fatal(err)
			}
			list, err := e.Runtime.ListContainers(e.Ctx(), &runtimeapi.ListContainersRequest{})
			if err != nil || len(list.Containers) != 0 {
				t.Errorf("after RemovePodSandbox containers = %v, %v", list.GetContainers(), err)
			}
			assertGone(t, e, info)
		})
	}
}
