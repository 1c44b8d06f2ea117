package cri_test

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// gvisorSandboxes lists the pids of the runsc sandbox processes of the runtime's runsc handler.
func gvisorSandboxes(t *testing.T, e *runtimetest.Env) []int {
	t.Helper()
	root := "--root=" + e.Config.Handlers["runsc"].Root
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if filepath.Base(args[0]) == "runsc-sandbox" && len(args) > 1 && args[1] == root {
			out = append(out, pid)
		}
	}
	return out
}

func execIn(t *testing.T, e *runtimetest.Env, id string, cmd ...string) string {
	t.Helper()
	resp, err := e.Runtime.ExecSync(e.Ctx(), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: 60})
	if err != nil || resp.ExitCode != 0 {
		t.Fatalf("exec %v in %s: %v, exit %v (stderr %q)", cmd, id, err, resp.GetExitCode(), resp.GetStderr())
	}
	return string(resp.Stdout)
}

// processesSeen lists the command lines of the processes a container sees in its PID namespace.
func processesSeen(t *testing.T, e *runtimetest.Env, id string) string {
	t.Helper()
	out := execIn(t, e, id, "sh", "-c", "for p in /proc/[0-9]*; do cat $p/cmdline; echo; done")
	return strings.ReplaceAll(out, "\x00", " ")
}

// TestGvisorPodIsOneSandbox: a runsc pod is one gVisor sandbox holding both its containers, in the
// pod's cgroup; they share its PID namespace when the pod asks (and not otherwise), reach each
// other over localhost, report stats from runsc, and exit, stop and get removed as runc's do.
func TestGvisorPodIsOneSandbox(t *testing.T) {
	e := runtimetest.Start(t)
	pod := withNamespaces(e.PodWithLogs("gvshared"), runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD)
	sb := e.RunPod(pod, "runsc")
	_, info := podStatus(t, e, sb)

	web := e.RunContainer(sb, pod, runtimetest.ContainerConfig("web", "sh", "-c",
		"mkdir -p /www && echo hello-from-web > /www/index.html && exec httpd -f -p 8080 -h /www"))
	idle := e.RunContainer(sb, pod, runtimetest.ContainerConfig("idle", "sleep", "7777"))
	e.WaitListening(web, 8080)

	// One sandbox process for the pod, the pod's init, in the pod's cgroup.
	sandboxes := gvisorSandboxes(t, e)
	if len(sandboxes) != 1 || sandboxes[0] != info.PID {
		t.Fatalf("runsc sandbox processes %v, want one: the pod's init %d", sandboxes, info.PID)
	}
	cg, err := os.ReadFile("/proc/" + strconv.Itoa(info.PID) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if want := ":/" + strings.TrimPrefix(info.CgroupParent, "/") + "/pod-init\n"; !bytes.Contains(cg, []byte(want)) {
		t.Errorf("sandbox cgroups:\n%s\nwant %q", cg, want)
	}

	// Localhost between the containers, and one PID namespace whose init is the pod's.
	if got := execIn(t, e, idle, "wget", "-q", "-O-", "http://127.0.0.1:8080/"); strings.TrimSpace(got) != "hello-from-web" {
		t.Errorf("idle fetched %q from web over localhost", got)
	}
	if got := processesSeen(t, e, web); !strings.Contains(got, "sleep 7777") || !strings.Contains(got, "catatonit") {
		t.Errorf("web does not see idle's process and the pod's init:\n%s", got)
	}
	if got := processesSeen(t, e, idle); !strings.Contains(got, "httpd -f -p 8080") {
		t.Errorf("idle does not see web's process:\n%s", got)
	}

	// Exit codes reach the record through conmon, also across a daemon restart.
	done := e.RunContainer(sb, pod, runtimetest.ContainerConfig("done", "sh", "-c", "exit 7"))
	if st := e.WaitContainerState(done, runtimeapi.ContainerState_CONTAINER_EXITED); st.ExitCode != 7 {
		t.Errorf("done exited %d (%s), want 7", st.ExitCode, st.Reason)
	}
	late := e.RunContainer(sb, pod, runtimetest.ContainerConfig("late", "sh", "-c", "until [ -f /tmp/go ]; do sleep 0.1; done; exit 9"))
	never := e.CreateContainer(sb, pod, runtimetest.ContainerConfig("never", "true"))
	e.Restart()
	if st, _ := podStatus(t, e, sb); st.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("after a restart the pod is %v", st.State)
	}
	if got := execIn(t, e, idle, "wget", "-q", "-O-", "http://127.0.0.1:8080/"); strings.TrimSpace(got) != "hello-from-web" {
		t.Errorf("after a restart idle fetched %q", got)
	}
	execIn(t, e, late, "touch", "/tmp/go")
	if st := e.WaitContainerState(late, runtimeapi.ContainerState_CONTAINER_EXITED); st.ExitCode != 9 {
		t.Errorf("late exited %d (%s) after the restart, want 9", st.ExitCode, st.Reason)
	}
	// A container never started is removed at once: its waiter is let go.
	start := time.Now()
	if _, err := e.Runtime.RemoveContainer(e.Ctx(), &runtimeapi.RemoveContainerRequest{ContainerId: never}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Errorf("removing a created container took %v", d)
	}
	if _, err := e.Runtime.StopContainer(e.Ctx(), &runtimeapi.StopContainerRequest{ContainerId: idle, Timeout: 10}); err != nil {
		t.Fatal(err)
	}
	if st := e.Status(idle); st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 143 {
		t.Errorf("idle after stop: %v, exit %d", st.State, st.ExitCode)
	}

	if _, err := e.Runtime.StopPodSandbox(e.Ctx(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	if st := e.Status(web); st.State != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("after StopPodSandbox web is %v", st.State)
	}
	if left := gvisorSandboxes(t, e); len(left) != 0 {
		t.Errorf("sandbox processes after StopPodSandbox: %v", left)
	}
	if _, err := e.Runtime.RemovePodSandbox(e.Ctx(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	assertGone(t, e, info)
	if ents, _ := os.ReadDir(e.Config.Handlers["runsc"].Root); len(ents) != 0 {
		var names []string
		for _, ent := range ents {
			names = append(names, ent.Name())
		}
		t.Errorf("runsc state left: %v", names)
	}
}

// TestGvisorPodOwnPIDNamespaces: without a shared PID namespace each container of a runsc pod has
// its own, and a debug container targeting one sees that one's processes.
func TestGvisorPodOwnPIDNamespaces(t *testing.T) {
	e := runtimetest.Start(t)
	pod := withNamespaces(e.PodWithLogs("gvown"), runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_CONTAINER, runtimeapi.NamespaceMode_POD)
	sb := e.RunPod(pod, "runsc")
	own := func(name string, cmd ...string) *runtimeapi.ContainerConfig {
		c := runtimetest.ContainerConfig(name, cmd...)
		c.Linux.SecurityContext.NamespaceOptions = &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER}
		return c
	}
	a := e.RunContainer(sb, pod, own("a", "sleep", "8881"))
	b := e.RunContainer(sb, pod, own("b", "sleep", "8882"))
	if got := processesSeen(t, e, b); strings.Contains(got, "sleep 8881") || !strings.Contains(got, "sleep 8882") {
		t.Errorf("b sees:\n%s", got)
	}
	dbg := runtimetest.ContainerConfig("debug", "sleep", "8883")
	dbg.Linux.SecurityContext.NamespaceOptions = &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: a}
	d := e.RunContainer(sb, pod, dbg)
	if got := processesSeen(t, e, d); !strings.Contains(got, "sleep 8881") || strings.Contains(got, "sleep 8882") {
		t.Errorf("the debug container targeting a sees:\n%s", got)
	}
	if n := len(gvisorSandboxes(t, e)); n != 1 {
		t.Errorf("%d sandbox processes for one pod", n)
	}
}

// TestGvisorHostNetworkPod: a host-network runsc pod uses the host's network stack (runsc
// --network=host) and its containers run, exec and exit as in any other gVisor pod.
func TestGvisorHostNetworkPod(t *testing.T) {
	e := runtimetest.Start(t)
	pod := withNamespaces(e.PodWithLogs("gvhost"), runtimeapi.NamespaceMode_NODE, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD)
	sb := e.RunPod(pod, "runsc")
	idle := e.RunContainer(sb, pod, runtimetest.ContainerConfig("idle", "sleep", "1000"))
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(execIn(t, e, idle, "hostname")); got != host && got != pod.Hostname {
		t.Errorf("hostname in a host-network gVisor pod: %q", got)
	}
	// The host's loopback is the pod's: a server the test runs there answers. (Not the interface
	// list in /proc/net/dev, which a loaded test run once saw empty; and nc, not busybox wget,
	// which this runsc's host network stack fails with EAGAIN.)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("from-the-host\n"))
			c.Close()
		}
	}()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	if got := execIn(t, e, idle, "nc", "127.0.0.1", port); got != "from-the-host\n" {
		t.Errorf("a host-network gVisor pod read %q from the host's loopback", got)
	}
	done := e.RunContainer(sb, pod, runtimetest.ContainerConfig("done", "sh", "-c", "exit 3"))
	if st := e.WaitContainerState(done, runtimeapi.ContainerState_CONTAINER_EXITED); st.ExitCode != 3 {
		t.Errorf("done exited %d", st.ExitCode)
	}
}

// TestGvisorSandboxLostWhileDown: a gVisor sandbox that dies while the daemon is down leaves a
// NOTREADY pod whose containers are exited, and the pod is removed cleanly.
func TestGvisorSandboxLostWhileDown(t *testing.T) {
	e := runtimetest.Start(t)
	pod := e.PodWithLogs("gvlost")
	sb := e.RunPod(pod, "runsc")
	_, info := podStatus(t, e, sb)
	c := e.RunContainer(sb, pod, runtimetest.ContainerConfig("idle", "sleep", "100000"))
	e.Stop()
	if err := syscall.Kill(info.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for len(gvisorSandboxes(t, e)) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the killed sandbox process is still there")
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.Restart()
	if st, _ := podStatus(t, e, sb); st.State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("pod after its sandbox died: %v", st.State)
	}
	if st := e.WaitContainerState(c, runtimeapi.ContainerState_CONTAINER_EXITED); st.ExitCode == 0 {
		t.Errorf("container of a dead sandbox: %+v", st)
	}
	if _, err := e.Runtime.RemovePodSandbox(e.Ctx(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	assertGone(t, e, info)
}
