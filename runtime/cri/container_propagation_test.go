package cri_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// sharedMount makes a temp dir a shared mount point (as the kubelet makes its pods dir) and
// unmounts it, and whatever was mounted below it, at cleanup.
func sharedMount(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

func TestContainerMountPropagation(t *testing.T) {
	e := runtimetest.Start(t)
	pod := e.PodWithLogs("prop")
	pod.Linux.SecurityContext = &runtimeapi.LinuxSandboxSecurityContext{Privileged: true}
	sb := e.RunPod(pod, "")

	// Host to container: a mount made on the host after the start shows up inside.
	h2c := sharedMount(t)
	cfg := runtimetest.ContainerConfig("h2c", "sh", "-c", "echo ready; while [ ! -e /data/sub/flag ]; do sleep 0.05; done; echo SEEN")
	cfg.Mounts = []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: h2c, Propagation: runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER}}
	id := e.RunContainer(sb, pod, cfg)
	e.WaitLog(e.Status(id).LogPath, "ready")
	sub := filepath.Join(h2c, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(sub, unix.MNT_DETACH)
	if err := os.WriteFile(filepath.Join(sub, "flag"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.WaitLog(e.Status(id).LogPath, "SEEN")

	// Bidirectional: a mount the (privileged) container makes shows up on the host.
	bi := sharedMount(t)
	if err := os.Mkdir(filepath.Join(bi, "inner"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg = runtimetest.ContainerConfig("bidi", "sh", "-c", "mount -t tmpfs t /data/inner && echo hi > /data/inner/file && echo DONE; sleep 1000")
	cfg.Linux.SecurityContext.Privileged = true
	cfg.Mounts = []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: bi, Propagation: runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL}}
	id = e.RunContainer(sb, pod, cfg)
	e.WaitLog(e.Status(id).LogPath, "DONE")
	deadline := time.Now().Add(time.Minute)
	for {
		if b, err := os.ReadFile(filepath.Join(bi, "inner", "file")); err == nil && string(b) == "hi\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the container's mount did not propagate to the host")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := unix.Unmount(filepath.Join(bi, "inner"), unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
}
