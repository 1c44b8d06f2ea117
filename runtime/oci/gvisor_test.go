package oci

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestGvisorPIDNamespace(t *testing.T) {
	pod, own, target := "/pods/p/pidns", "/ctr/c/pidns", "/ctr/t/pidns"
	for _, tc := range []struct {
		name      string
		mode      runtimeapi.NamespaceMode
		podShares bool
		want      string
	}{
		{"pod mode in a sharing pod", runtimeapi.NamespaceMode_POD, true, pod},
		{"pod mode in a pod that shares none", runtimeapi.NamespaceMode_POD, false, own},
		{"container mode", runtimeapi.NamespaceMode_CONTAINER, true, own},
		{"node mode gets the pod's", runtimeapi.NamespaceMode_NODE, true, pod},
		{"node mode without a pod namespace", runtimeapi.NamespaceMode_NODE, false, own},
		{"target", runtimeapi.NamespaceMode_TARGET, true, target},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &GvisorPlacement{SandboxID: "sb", OwnPIDKey: own, TargetPIDKey: target}
			if tc.podShares {
				g.PodPIDKey = pod
			}
			s := &specs.Spec{Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{
				{Type: specs.MountNamespace}, {Type: specs.PIDNamespace, Path: "/proc/1/ns/pid"}, {Type: specs.NetworkNamespace, Path: "/netns"},
			}}}
			g.setPIDNamespace(s, &runtimeapi.NamespaceOption{Pid: tc.mode})
			var pids []string
			for _, n := range s.Linux.Namespaces {
				if n.Type == specs.PIDNamespace {
					pids = append(pids, n.Path)
				}
			}
			if len(pids) != 1 || pids[0] != tc.want || len(s.Linux.Namespaces) != 3 {
				t.Errorf("namespaces %+v, want one PID namespace keyed %q", s.Linux.Namespaces, tc.want)
			}
		})
	}
}

func TestWriteGvisorInfra(t *testing.T) {
	dir := t.TempDir()
	in := GvisorInfra{ID: "sb1", Bundle: dir, Catatonit: "/usr/bin/catatonit", NetNSPath: "/run/ns/net/sb1",
		Hostname: "pod", CgroupsPath: "/kubepods/podx/pod-init", PIDKey: "/pods/sb1/pidns", Network: "sandbox"}
	if err := WriteGvisorInfra(in); err != nil {
		t.Fatal(err)
	}
	s, err := ReadSpec(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Annotations[GvisorContainerType] != "sandbox" || s.Annotations[GvisorSandboxID] != "sb1" {
		t.Errorf("annotations %v", s.Annotations)
	}
	if !s.Root.Readonly || s.Root.Path != filepath.Join(dir, "rootfs") || strings.Join(s.Process.Args, " ") != "/catatonit -P" {
		t.Errorf("root %+v, args %v", s.Root, s.Process.Args)
	}
	if s.Linux.CgroupsPath != in.CgroupsPath || s.Hostname != "pod" {
		t.Errorf("cgroups path %q, hostname %q", s.Linux.CgroupsPath, s.Hostname)
	}
	got := map[specs.LinuxNamespaceType]string{}
	for _, n := range s.Linux.Namespaces {
		got[n.Type] = n.Path
	}
	if got[specs.NetworkNamespace] != in.NetNSPath || got[specs.PIDNamespace] != in.PIDKey {
		t.Errorf("namespaces %v", s.Linux.Namespaces)
	}
	if err := WriteGvisorInfra(GvisorInfra{ID: "x", Bundle: t.TempDir()}); err == nil {
		t.Error("no catatonit: no error")
	}
}

// TestGvisorWaitWrapper runs the wrapper against a stand-in for runsc: create writes the sandbox's
// pid, which the wrapper replaces by its waiter's; the waiter starts the container with the
// stdio create was given once told through the gate, then asks for the exit status and ends.
func TestGvisorWaitWrapper(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "runsc")
	calls := filepath.Join(dir, "calls")
	script := "#!/bin/sh\necho \"$*\" >> " + calls + "\n" +
		"case \" $* \" in\n" +
		"*\" create \"*) for a do p=$q; q=$a; [ \"$p\" = --pid-file ] && echo 4242 > \"$a\"; done ;;\n" +
		"*\" start \"*) echo started-with-the-container-stdio ;;\n" +
		"*\" wait \"*) echo '{\"id\":\"c1\",\"exitStatus\":7}' ;;\n" +
		"esac\nexit 0\n"
	if err := os.WriteFile(fake, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	w, err := GvisorWaitWrapper(filepath.Join(dir, "handlers"), fake)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := GvisorWaitWrapper(filepath.Join(dir, "handlers"), fake); err != nil || again != w {
		t.Fatalf("second write: %q, %v", again, err)
	}
	bundle := filepath.Join(dir, "bundle")
	if err := os.Mkdir(bundle, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := MakeStartGate(bundle); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(bundle, "pidfile")
	stdout, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	cmd := exec.Command(w, "--root", "/r", "--platform=ptrace", "create", "--bundle", bundle, "--pid-file", pidFile, "c1")
	cmd.Stdout = stdout
	// Files, not pipes: the waiter keeps create's stdio until it has started the container.
	cmd.Stderr = stdout
	if err := cmd.Run(); err != nil {
		b, _ := os.ReadFile(stdout.Name())
		t.Fatalf("wrapper create: %v: %s", err, b)
	}
	b, _ := os.ReadFile(pidFile)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid == 4242 {
		t.Fatalf("pid file holds %q, want the waiter's pid", b)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err != nil {
		t.Fatalf("waiter %d is not running: %v", pid, err)
	}
	if b, _ := os.ReadFile(calls); strings.Contains(string(b), "start") || strings.Contains(string(b), "wait") {
		t.Fatalf("the waiter went on before the gate opened: %s", b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := StartThroughGate(ctx, bundle); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); os.IsNotExist(err) {
			break
		}
		if st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); strings.Contains(string(st), ") Z ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiter %d did not end after the start", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if b, _ := os.ReadFile(calls); !strings.Contains(string(b), "--root /r --platform=ptrace start c1") ||
		!strings.Contains(string(b), "--root /r --platform=ptrace wait c1") {
		t.Errorf("runsc calls:\n%s", b)
	}
	if b, _ := os.ReadFile(stdout.Name()); !strings.Contains(string(b), "started-with-the-container-stdio") {
		t.Errorf("runsc start did not get create's stdout: %q", b)
	}
	if err := OpenStartGate(bundle); err != nil {
		t.Errorf("gate opened again with no waiter: %v", err)
	}
	if err := StartThroughGate(ctx, bundle); err == nil {
		t.Error("a second start through a gate with no waiter succeeded")
	}
	// Other verbs go to runsc as they are.
	if out, err := exec.Command(w, "--root", "/r", "state", "c1").CombinedOutput(); err != nil {
		t.Fatalf("wrapper state: %v: %s", err, out)
	}
	if b, _ := os.ReadFile(calls); !strings.Contains(string(b), "--root /r state c1") {
		t.Errorf("runsc calls:\n%s", b)
	}
}

// TestStartThroughGateMonitorGone: a waiter that took the word and died without answering (its
// conmon gone with it) fails the start instead of hanging it.
func TestStartThroughGateMonitorGone(t *testing.T) {
	bundle := t.TempDir()
	if err := MakeStartGate(bundle); err != nil {
		t.Fatal(err)
	}
	// A reader that never answers stands in for the dead waiter.
	gate, err := os.OpenFile(filepath.Join(bundle, GvisorStartGate), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Close()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, ConmonPid), []byte(strconv.Itoa(gone.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := StartThroughGate(ctx, bundle); err == nil || ctx.Err() != nil {
		t.Fatalf("start with the monitor gone: %v (context %v)", err, ctx.Err())
	}
}

// TestGvisorDropsUnknownCaps: a privileged gVisor container gets every capability this runsc
// knows, none it would refuse to start with.
func TestGvisorDropsUnknownCaps(t *testing.T) {
	rootfs := t.TempDir()
	in := SpecInput{
		ID: "c1", Rootfs: rootfs,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "c"}, Command: []string{"true"},
			Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{Privileged: true}},
		},
		Sandbox: &runtimeapi.PodSandboxConfig{Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{Privileged: true}}},
		Gvisor: &GvisorPlacement{SandboxID: "sb", OwnPIDKey: "/b/pidns"},
	}
	s, err := Generate(in)
	if err != nil {
		t.Fatal(err)
	}
	c := s.Process.Capabilities
	for _, set := range [][]string{c.Bounding, c.Effective, c.Permitted} {
		has := map[string]bool{}
		for _, n := range set {
			has[n] = true
		}
		if !has["CAP_SYS_ADMIN"] || has["CAP_BPF"] || has["CAP_PERFMON"] || has["CAP_CHECKPOINT_RESTORE"] || len(has) != len(set) {
			t.Errorf("capabilities %v", set)
		}
	}
	if s.Annotations[GvisorContainerType] != "container" || s.Annotations[GvisorSandboxID] != "sb" {
		t.Errorf("annotations %v", s.Annotations)
	}
}
