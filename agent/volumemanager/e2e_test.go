package volumemanager

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/crirt"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// TestVolumesInRealContainers runs busybox containers on nodelet's runtime with the volumes this
// package makes: emptyDir on disk and in memory, hostPath read-only, a subPathExpr, and the
// CVE-2017-1002101 attack — a container plants a symlink to "/" in its volume and a second
// container of the pod mounts it through subPath.
func TestVolumesInRealContainers(t *testing.T) {
	rt := crirt.Start(t, filepath.Join(t.TempDir(), "rt"))
	image := rt.Push(t, "busybox:vol", nil)
	rt.Pull(t, image)
	root := t.TempDir()
	m := &Manager{RootDir: root}
	hostDir := filepath.Join(t.TempDir(), "host")
	limit := resource.MustParse("1Mi")
	pod := testPod("uid-e2e-vol",
		v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		v1.Volume{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: &limit}}},
		v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostDir, Type: hostPathType(v1.HostPathDirectoryOrCreate)}}})
	if err := m.SetUp(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.TearDown(pod.UID); err != nil {
			t.Error(err)
		}
		if mps := testutil.MountsUnder(root); len(mps) > 0 {
			t.Errorf("mounts left: %v", mps)
		}
	})
	data := emptyDir(t, m, pod, "data")
	logs, err := m.SubPath(pod, "app", 3, "data", data, "logs/web-0")
	if err != nil {
		t.Fatal(err)
	}
	p := rt.RunPod(t, "vol", string(pod.UID), filepath.Join(t.TempDir(), "logs"))
	id := rt.Start(t, p, "app", 0, image, []string{"sleep", "3600"},
		&runtimeapi.Mount{ContainerPath: "/data", HostPath: data},
		&runtimeapi.Mount{ContainerPath: "/mem", HostPath: emptyDir(t, m, pod, "mem")},
		&runtimeapi.Mount{ContainerPath: "/host", HostPath: hostDir, Readonly: true},
		&runtimeapi.Mount{ContainerPath: "/logs", HostPath: logs})

	rt.Exec(t, id, "sh", "-c", "echo hello > /logs/out")
	if b, _ := os.ReadFile(filepath.Join(data, "logs/web-0/out")); string(b) != "hello\n" {
		t.Fatalf("subPathExpr write seen on the host as %q", b)
	}
	if out, code, _ := rt.ExecCode(id, "dd", "if=/dev/zero", "of=/mem/big", "bs=1024", "count=2048"); code == 0 {
		t.Fatalf("wrote 2 MiB into a 1 MiB memory emptyDir: %s", out)
	}
	if out, code, _ := rt.ExecCode(id, "touch", "/host/x"); code == 0 {
		t.Fatalf("wrote into a read-only hostPath: %s", out)
	}

	// The attack: the container points a name in its volume at "/", meaning the host's root to
	// anyone resolving it outside the container.
	rt.Exec(t, id, "ln", "-s", "/", "/data/evil")
	rt.Exec(t, id, "ln", "-s", "../../../../../../../../etc", "/data/evil2")
	for i, s := range []string{"evil", "evil/etc", "evil2", "evil2/passwd"} {
		if got, err := m.SubPath(pod, "second", i, "data", data, s); !errors.Is(err, ErrBadSubPath) {
			t.Fatalf("subPath %q through the planted symlink: %q, %v", s, got, err)
		}
	}
	// Listing what a mount of the bind target shows proves no host folder was reached.
	if entries, _ := os.ReadDir(filepath.Join(podDir(t, m, pod), "volume-subpaths", "data", "second")); len(entries) > 0 {
		for _, e := range entries {
			if mps := testutil.MountsUnder(filepath.Join(podDir(t, m, pod), "volume-subpaths", "data", "second", e.Name())); len(mps) > 0 {
				t.Fatalf("a mount was made for a refused subPath: %v", mps)
			}
		}
	}
	out := rt.Exec(t, id, "ls", "/logs")
	if !strings.Contains(out, "out") {
		t.Fatalf("ls /logs: %q", out)
	}
	if _, err := rt.RS.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.RS.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.ID}); err != nil {
		t.Fatal(err)
	}
}
