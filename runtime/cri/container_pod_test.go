package cri_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/engine"
	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// TestContainerPodNamespaces checks what containers of one pod share: the hostname, the pod's
// files, and with a shared PID namespace each other's processes.
func TestContainerPodNamespaces(t *testing.T) {
	e := runtimetest.Start(t)
	pod := e.PodWithLogs("shared")
	pod.Hostname = "shared-host"
	pod.Linux.Sysctls = map[string]string{"kernel.shm_rmid_forced": "1"}
	pod.Linux.SecurityContext = &runtimeapi.LinuxSandboxSecurityContext{
		NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_POD},
	}
	sb := e.RunPod(pod, "")
	podNS := func(cfg *runtimeapi.ContainerConfig) *runtimeapi.ContainerConfig {
		cfg.Linux.SecurityContext.NamespaceOptions = &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_POD}
		return cfg
	}
	e.RunContainer(sb, pod, podNS(runtimetest.ContainerConfig("sleeper", "sleep", "4242")))
	_, log := runToLog(t, e, sb, pod, podNS(runtimetest.ContainerConfig("looker", "sh", "-c",
		"hostname; ps -o args; echo shm=$(cat /proc/sys/kernel/shm_rmid_forced); echo END")))
	if !strings.Contains(log, "F shared-host") {
		t.Errorf("hostname:\n%s", log)
	}
	if !strings.Contains(log, "sleep 4242") {
		t.Errorf("the shared PID namespace does not show the other container:\n%s", log)
	}
	if !strings.Contains(log, "shm=1") {
		t.Errorf("the pod's sysctl is not in force:\n%s", log)
	}
	// A container asking for its own PID namespace sees only its own processes.
	cfg := runtimetest.ContainerConfig("alone2", "sh", "-c", "ps -o args; echo END")
	cfg.Linux.SecurityContext.NamespaceOptions = &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER}
	_, log = runToLog(t, e, sb, pod, cfg)
	if strings.Contains(log, "sleep 4242") {
		t.Errorf("a private PID namespace shows the pod's processes:\n%s", log)
	}
}

func TestContainerPrivileged(t *testing.T) {
	e := runtimetest.Start(t)
	pod := e.PodWithLogs("priv")
	pod.Linux.SecurityContext = &runtimeapi.LinuxSandboxSecurityContext{Privileged: true}
	sb := e.RunPod(pod, "")
	cfg := runtimetest.ContainerConfig("priv", "sh", "-c", "grep CapEff /proc/self/status; mount -t tmpfs t /tmp && echo MOUNTED; ls /dev/null /dev/kmsg; echo END")
	cfg.Linux.SecurityContext.Privileged = true
	_, log := runToLog(t, e, sb, pod, cfg)
	if !strings.Contains(log, "MOUNTED") || strings.Contains(log, "CapEff:\t00000000a80425fb") || !strings.Contains(log, "/dev/kmsg") {
		t.Errorf("privileged container:\n%s", log)
	}
}

// TestContainerCreateRollback makes the OCI runtime fail at create and checks that nothing of
// the container is left: no record, bundle, rootfs or reserved name.
func TestContainerCreateRollback(t *testing.T) {
	e := runtimetest.Start(t, runtimetest.WithConfig(func(c *engine.Config) {
		c.Handlers["broken"] = engine.Handler{Name: "broken", Path: "/bin/false", Root: filepath.Join(c.State, "handlers", "broken")}
	}))
	pod := e.PodWithLogs("rollback")
	sb := e.RunPod(pod, "broken")
	_, err := e.Runtime.CreateContainer(e.Ctx(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: runtimetest.ContainerConfig("c", "true"), SandboxConfig: pod})
	if err == nil {
		t.Fatal("create with a failing runtime succeeded")
	}
	list, _ := e.Runtime.ListContainers(e.Ctx(), &runtimeapi.ListContainersRequest{})
	if len(list.GetContainers()) != 0 {
		t.Fatalf("listed after failed create: %v", list)
	}
	for _, dir := range []string{filepath.Join(e.Config.Root, "containers"), filepath.Join(e.Dir, "overlays"), filepath.Join(e.Config.State, "exits")} {
		ents, _ := os.ReadDir(dir)
		if len(ents) != 0 {
			t.Errorf("%s not empty after a failed create: %v", dir, ents)
		}
	}
	// The name is free again: the same create on a working pod of the same name succeeds.
	if _, err := e.Runtime.StopPodSandbox(e.Ctx(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Runtime.RemovePodSandbox(e.Ctx(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb}); err != nil {
		t.Fatal(err)
	}
	sb = e.RunPod(pod, "runc")
	e.CreateContainer(sb, pod, runtimetest.ContainerConfig("c", "true"))
}

// TestContainerDebugTarget runs a debug container in the PID namespace of another container of
// the pod (kubectl debug --target).
func TestContainerDebugTarget(t *testing.T) {
	e := runtimetest.Start(t)
	pod := e.PodWithLogs("debug")
	sb := e.RunPod(pod, "")
	target := runtimetest.ContainerConfig("app", "sleep", "4343")
	target.Linux.SecurityContext.NamespaceOptions = &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER}
	tid := e.RunContainer(sb, pod, target)
	dbg := runtimetest.ContainerConfig("debugger", "sh", "-c", "ps -o args; echo END")
	dbg.Linux.SecurityContext.NamespaceOptions = &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: tid}
	_, log := runToLog(t, e, sb, pod, dbg)
	if !strings.Contains(log, "sleep 4343") {
		t.Fatalf("the debug container does not see its target:\n%s", log)
	}
}

// TestContainerImageVolume mounts an image's contents (and a sub path of it) read-only into a
// container, and removes them with it.
func TestContainerImageVolume(t *testing.T) {
	e := runtimetest.Start(t)
	pod := e.PodWithLogs("imgvol")
	sb := e.RunPod(pod, "")
	cfg := runtimetest.ContainerConfig("user", "sh", "-c",
		"ls /vol/bin/busybox && ls /sub/busybox && echo FOUND; echo x > /vol/f || echo ROVOL; echo END")
	cfg.Mounts = []*runtimeapi.Mount{
		{ContainerPath: "/vol", Image: &runtimeapi.ImageSpec{Image: runtimetest.Image}},
		{ContainerPath: "/sub", Image: &runtimeapi.ImageSpec{Image: runtimetest.Image}, ImageSubPath: "bin"},
	}
	st, log := runToLog(t, e, sb, pod, cfg)
	if !strings.Contains(log, "FOUND") || !strings.Contains(log, "ROVOL") {
		t.Fatalf("image volumes:\n%s", log)
	}
	if len(st.Mounts) != 2 || st.Mounts[0].GetImage().GetImage() != runtimetest.Image {
		t.Fatalf("status mounts: %v", st.Mounts)
	}
	if _, err := e.Runtime.RemoveContainer(e.Ctx(), &runtimeapi.RemoveContainerRequest{ContainerId: st.Id}); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.Dir, "overlays")); len(ents) != 0 {
		t.Fatalf("image volumes left: %v", ents)
	}
	// A sub path that is not in the image fails the create and leaves nothing.
	cfg.Mounts = []*runtimeapi.Mount{{ContainerPath: "/vol", Image: &runtimeapi.ImageSpec{Image: runtimetest.Image}, ImageSubPath: "no/such"}}
	cfg.Metadata.Name = "bad"
	if _, err := e.Runtime.CreateContainer(e.Ctx(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: cfg, SandboxConfig: pod}); err == nil {
		t.Fatal("created with a missing image sub path")
	}
	if ents, _ := os.ReadDir(filepath.Join(e.Dir, "overlays")); len(ents) != 0 {
		t.Fatalf("failed create left: %v", ents)
	}
}
