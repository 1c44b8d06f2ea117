package cri_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/engine"
	"github.com/nodelet/nodelet/runtime/imageservice"
	"github.com/nodelet/nodelet/runtime/imagestore"
	"github.com/nodelet/nodelet/runtime/store"
	"github.com/nodelet/nodelet/test/harness/runtimetest"
	"github.com/nodelet/nodelet/test/harness/testimage"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// imageStoreEnv starts a server whose containers come from a real image store holding one
// pulled busybox image, served as the ImageService; it returns the env, the store's dir and the
// image's reference.
func imageStoreEnv(t *testing.T) (*runtimetest.Env, string, string) {
	e, dir, ref, _ := imageStoreEnvStore(t)
	return e, dir, ref
}

// imageStoreEnvStore is imageStoreEnv that also returns the store.
func imageStoreEnvStore(t *testing.T) (*runtimetest.Env, string, string, *imagestore.Store) {
	t.Helper()
	img, err := testimage.Busybox()
	if err != nil {
		t.Fatal(err)
	}
	ref := testimage.Serve(t, map[string]v1.Image{"busybox:latest": img}) + "/busybox:latest"
	dir := t.TempDir()
	testutil.CheckNoLeaks(t, dir)
	store, err := imagestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := runtimetest.Start(t,
		runtimetest.WithConfig(func(c *engine.Config) { c.Images = store }),
		runtimetest.WithImageService(imageservice.New(store)))
	if _, err := e.Image.PullImage(e.Ctx(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		t.Fatal(err)
	}
	return e, dir, ref, store
}

// A daemon killed while a CreateContainer is parked in the runtime's create leaves a mounted
// rootfs, a bundle, a monitor and a hung runtime call, and no container record. The restarted
// daemon must remove all of it, so the image is no longer in use and can be removed.
func TestContainerCrashDuringCreateIsSwept(t *testing.T) {
	e, storeDir, ref := imageStoreEnv(t)
	fault := newFaultRuntime(t, "hang")
	rt, daemon := startCrashDaemonWith(t, e, crashDaemonConfig{
		Runc: fault.Path, Conmon: e.Config.ConmonPath, ImageStore: storeDir,
	})
	pod := e.PodWithLogs("crash-create")
	sb, err := rt.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: pod})
	if err != nil {
		t.Fatal(err)
	}
	cfg := runtimetest.ContainerConfig("parked", "true")
	cfg.Image.Image = ref
	done := make(chan error, 1)
	go func() {
		_, err := rt.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{
			PodSandboxId: sb.PodSandboxId, Config: cfg, SandboxConfig: pod})
		done <- err
	}()
	hung := fault.waitTripped(t)
	if len(testutil.MountsUnder(filepath.Join(storeDir, "rootfs"))) == 0 {
		t.Fatal("mid-create: no rootfs mounted")
	}
	killDaemon(t, daemon)
	if err := <-done; err == nil {
		t.Fatal("CreateContainer succeeded although its daemon was killed")
	}

	e.Restart()
	if m := testutil.MountsUnder(filepath.Join(storeDir, "rootfs")); len(m) > 0 {
		t.Errorf("rootfs still mounted after restart: %v", m)
	}
	if ents, _ := os.ReadDir(filepath.Join(storeDir, "rootfs")); len(ents) > 0 {
		t.Errorf("rootfs dirs left after restart: %v", ents)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.Config.Root, "containers")); len(ents) > 0 {
		t.Errorf("container records or bundles left after restart: %v", ents)
	}
	if p := testutil.ProcessesMentioning(filepath.Join(e.Config.Root, "containers")); len(p) > 0 {
		t.Errorf("monitor or runtime call of the cut-short create still runs: %v", p)
	}
	waitGone(t, hung)
	list, err := e.Runtime.ListContainers(e.Ctx(), &runtimeapi.ListContainersRequest{})
	if err != nil || len(list.Containers) != 0 {
		t.Fatalf("containers after restart: %v, %v", list, err)
	}
	if _, err := e.Image.RemoveImage(e.Ctx(), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		t.Fatalf("RemoveImage of the image a cut-short create used: %v", err)
	}
}

// waitGone waits (bounded, for a hung test) until pid has exited.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !gone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still runs", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// What no record owns (a rootfs, bundle and exit file of a create cut short before its record
// was written; the dirs, shm mount and cgroup of a sandbox whose record is gone) is removed by the
// restarted daemon, and what records own is left alone.
func TestRestartSweepsWhatNoRecordOwns(t *testing.T) {
	e, storeDir, ref, images := imageStoreEnvStore(t)
	keep := e.RunPod(e.PodWithLogs("kept"), "")
	lost := e.RunPod(e.PodWithLogs("lost"), "")
	orphan := store.NewID()
	if _, err := images.PrepareRootfs(e.Ctx(), orphan, ref); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(e.Config.Root, "containers", orphan), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.Config.State, "exits", orphan), []byte("0"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.Stop()
	if err := os.Remove(filepath.Join(e.Config.Root, "sandboxes", lost+".json")); err != nil {
		t.Fatal(err)
	}

	e.Restart()
	for _, p := range []string{
		filepath.Join(storeDir, "rootfs", orphan), filepath.Join(e.Config.Root, "containers", orphan),
		filepath.Join(e.Config.State, "exits", orphan), filepath.Join(e.Config.State, "pods", lost),
		filepath.Join(e.Config.Root, "pods", lost), filepath.Join("/sys/fs/cgroup/pids", e.Config.CgroupParent, lost),
		filepath.Join("/sys/fs/cgroup/unified", e.Config.CgroupParent, lost), filepath.Join("/sys/fs/cgroup", e.Config.CgroupParent, lost),
	} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left after restart (%v)", p, err)
		}
	}
	if m := testutil.MountsUnder(filepath.Join(storeDir, "rootfs"), filepath.Join(e.Config.State, "pods", lost)); len(m) > 0 {
		t.Errorf("mounts left after restart: %v", m)
	}
	for _, p := range []string{filepath.Join(e.Config.Root, "pods", keep), filepath.Join(e.Config.State, "pods", keep, "shm")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("the sweep removed what a record owns: %v", err)
		}
	}
	if _, err := e.Image.RemoveImage(e.Ctx(), &runtimeapi.RemoveImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}}); err != nil {
		t.Fatalf("RemoveImage of an image only an orphaned rootfs used: %v", err)
	}
}
