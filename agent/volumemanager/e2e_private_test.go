package volumemanager

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/test/harness/kubefake"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/crirt"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// TestNonRootContainerReadsPrivateVolumes: the host folders above a pod's volumes are closed to
// other users, yet a container running as an unprivileged uid reads its secret (a tmpfs) and writes
// its emptyDir, because the runtime bind mounts the volume folder itself.
func TestNonRootContainerReadsPrivateVolumes(t *testing.T) {
	rt := crirt.Start(t, filepath.Join(t.TempDir(), "rt"))
	image := rt.Push(t, "busybox:private", nil)
	rt.Pull(t, image)
	root := openRoot(t)
	client := fake.NewSimpleClientset(&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "default"},
		Data: map[string][]byte{"password": []byte("hunter2")}})
	m := &Manager{Client: kubefake.Wrap(client), RootDir: root}
	pod := testPod("uid-e2e-private",
		v1.Volume{Name: "secret", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}},
		v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	if err := m.Prepare(context.Background(), pod); err != nil {
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
	secret, _ := m.Path(pod, "secret")
	if out, err := asNobody("cat", filepath.Join(secret, "password")); err == nil {
		t.Fatalf("uid 65534 on the host reads the secret: %s", out)
	}

	p := rt.RunPod(t, "private", string(pod.UID), filepath.Join(t.TempDir(), "logs"))
	ctx := context.Background()
	c, err := rt.RS.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: p.ID, SandboxConfig: p.Config,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
			Image:    &runtimeapi.ImageSpec{Image: image},
			Command:  []string{"sleep", "3600"},
			Mounts: []*runtimeapi.Mount{
				{ContainerPath: "/secret", HostPath: secret, Readonly: true},
				{ContainerPath: "/data", HostPath: emptyDir(t, m, pod, "data")},
			},
			Labels: map[string]string{"io.kubernetes.pod.uid": string(pod.UID), "io.kubernetes.container.name": "app",
				"io.kubernetes.pod.name": "private", "io.kubernetes.pod.namespace": "default"},
			Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				RunAsUser: &runtimeapi.Int64Value{Value: 1000}}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.RS.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		t.Fatal(err)
	}
	if out := rt.Exec(t, c.ContainerId, "id", "-u"); strings.TrimSpace(out) != "1000" {
		t.Fatalf("container runs as %q", out)
	}
	if out := rt.Exec(t, c.ContainerId, "cat", "/secret/password"); out != "hunter2" {
		t.Fatalf("secret read in the container: %q", out)
	}
	rt.Exec(t, c.ContainerId, "sh", "-c", "echo ok > /data/f")
	if out, code, _ := rt.ExecCode(c.ContainerId, "touch", "/secret/x"); code == 0 {
		t.Fatalf("wrote into the secret volume: %s", out)
	}
	if _, err := rt.RS.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.RS.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.ID}); err != nil {
		t.Fatal(err)
	}
}
