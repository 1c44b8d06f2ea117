package kuberuntime

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/crirt"
)

// denyMkdir is an OCI seccomp profile that lets everything through but mkdir, which fails with
// EPERM (errno 1).
const denyMkdir = `{
  "defaultAction": "SCMP_ACT_ALLOW",
  "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32", "SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"],
  "syscalls": [{"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]
}`

// TestSeccompLocalhostOnTheRealRuntime: a pod whose seccompProfile is Localhost deny-mkdir.json,
// a file in the agent's <root-dir>/seccomp, runs on nodelet's runtime under that profile: mkdir
// fails with "Operation not permitted" while other commands work. A profile the folder lacks
// fails the container with the runtime's words, naming the file.
func TestSeccompLocalhostOnTheRealRuntime(t *testing.T) {
	rt := crirt.Start(t, filepath.Join(t.TempDir(), "rt"))
	image := rt.Push(t, "busybox:seccomp", nil)
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "seccomp"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "seccomp", "deny-mkdir.json"), []byte(denyMkdir), 0o644); err != nil {
		t.Fatal(err)
	}
	m := NewManager(Deps{Runtime: rt.RS, Images: rt.IS, RootDir: root, PodLogsDir: t.TempDir()})
	ctx := context.Background()
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.UID = "uid-e2e-seccomp"
	pod.Spec.HostNetwork = true
	profile := "deny-mkdir.json"
	pod.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: &profile}}
	pod.Spec.Containers[0].Image = image
	pod.Spec.Containers[0].Command = []string{"sleep", "3600"}
	t.Cleanup(func() {
		st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err == nil {
			zero := int64(0)
			m.KillPod(ctx, pod, st, &zero)
			m.RemovePod(ctx, st)
		}
	})
	sync := func() error {
		st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		return m.SyncPod(ctx, pod, st)
	}
	if err := sync(); err != nil {
		t.Fatal(err)
	}
	cs, err := rt.RS.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(cs.Containers) != 1 {
		t.Fatalf("containers: %v %v", cs, err)
	}
	id := cs.Containers[0].Id
	out, code, err := rt.ExecCode(id, "mkdir", "/tmp/denied")
	if err != nil || code == 0 || !strings.Contains(out, "Operation not permitted") {
		t.Fatalf("mkdir under deny-mkdir.json: exit %d, %v: %q", code, err, out)
	}
	if out := rt.Exec(t, id, "sh", "-c", "echo works > /tmp/file && cat /tmp/file && grep Seccomp: /proc/self/status"); !strings.Contains(out, "works") ||
		!strings.Contains(out, "Seccomp:\t2") {
		t.Fatalf("other commands under the profile: %q", out)
	}
	if out := rt.Exec(t, id, "ls", "/tmp"); strings.Contains(out, "denied") {
		t.Fatalf("the directory was made: %q", out)
	}

	// A profile the folder does not hold: the container is not made, and the waiting message is
	// the runtime's, naming the file the kubelet's layout says.
	missing := "missing.json"
	pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: "other", Image: image, Command: []string{"sleep", "3600"},
		SecurityContext: &v1.SecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: &missing}}})
	if err := sync(); err == nil {
		t.Fatal("a container with a missing profile was started")
	}
	want := `cannot load seccomp profile "` + filepath.Join(root, "seccomp", missing) + `": open ` + filepath.Join(root, "seccomp", missing) + `: no such file or directory`
	if r, _ := m.Reasons.Get(pod.UID, "other"); r.Reason != "CreateContainerError" || !strings.Contains(r.Message, want) {
		t.Fatalf("waiting reason %+v, want CreateContainerError containing %q", r, want)
	}
}
