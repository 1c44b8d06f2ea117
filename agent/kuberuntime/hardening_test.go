package kuberuntime

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/internal/podpath"
)

// TestUnsafePodNamesCreateNothing: a pod whose UID, name, namespace or container name would climb
// out of the log or root folder gets no sandbox, no container and no folder.
func TestUnsafePodNamesCreateNothing(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*v1.Pod)
	}{
		{"uid", func(p *v1.Pod) { p.UID = "../../../decoy" }},
		{"name", func(p *v1.Pod) { p.Name = "../decoy" }},
		{"namespace", func(p *v1.Pod) { p.Namespace = ".." }},
		{"container name", func(p *v1.Pod) { p.Spec.Containers[0].Name = "../../decoy" }},
		{"emptyDir name", func(p *v1.Pod) {
			p.Spec.Volumes = []v1.Volume{{Name: "../../../../../decoy", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "../../../../../decoy", MountPath: "/d"}}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t)
			base := t.TempDir()
			f.m.RootDir, f.m.PodLogsDir = filepath.Join(base, "root", "x"), filepath.Join(base, "logs", "x")
			f.cri.AddImage("busybox:latest")
			pod := testPod(v1.RestartPolicyAlways, nil, "app")
			c.mutate(pod)
			err := f.sync(pod)
			if !errors.Is(err, podpath.ErrUnsafe) {
				t.Fatalf("sync: %v, want ErrUnsafe", err)
			}
			if got := f.cri.CallsWithPrefix("CreateContainer"); len(got) > 0 {
				t.Fatalf("containers created: %v", got)
			}
			entries, _ := os.ReadDir(base)
			for _, e := range entries {
				if e.Name() != "logs" && e.Name() != "root" {
					t.Fatalf("made %s outside the root and log folders", e.Name())
				}
			}
			if _, err := os.Stat(filepath.Join(base, "decoy")); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("decoy made: %v", err)
			}
		})
	}
}

// TestPodLogDirsArePrivate: an unprivileged user of the host cannot list a pod's log folders.
func TestPodLogDirsArePrivate(t *testing.T) {
	f := newFixture(t)
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f.m.PodLogsDir = base
	f.cri.AddImage("busybox:latest")
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	// An older version made the pod's folder 0755: the next sync closes it.
	old := filepath.Join(base, "default_web_uid-1")
	if err := os.Mkdir(old, 0o755); err != nil {
		t.Fatal(err)
	}
	f.mustSync(pod)
	for _, d := range []string{old, filepath.Join(old, "app")} {
		st, err := os.Stat(d)
		if err != nil || st.Mode().Perm() != 0o750 {
			t.Errorf("%s: %v %v, want mode 0750", d, st, err)
		}
		cmd := exec.Command("ls", d)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Errorf("uid 65534 lists %s: %s", d, out)
		}
	}
	cmd := exec.Command("ls", base)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("control: uid 65534 cannot list the logs root: %v %s", err, out)
	}
}
