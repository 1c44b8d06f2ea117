package cri_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/engine"
	"github.com/nodelet/nodelet/test/harness/runtimetest"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// An image whose /etc/passwd is a FIFO (or leads to a device) once made CreateContainer block in
// open(2) forever, with the name reserved and the overlay mounted. It must fail at once, naming
// the file, leave nothing behind, and a retry of the same name must succeed once the image is fixed.
func TestCreateContainerHostileImagePasswd(t *testing.T) {
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, rootfs, passwd string)
	}{
		{name: "fifo", plant: func(t *testing.T, rootfs, passwd string) {
			if err := unix.Mkfifo(passwd, 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "symlink to /dev/zero", plant: func(t *testing.T, rootfs, passwd string) {
			if err := unix.Mknod(filepath.Join(rootfs, "dev/zero"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 5))); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("/dev/zero", passwd); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := runtimetest.Start(t)
			pod := e.PodWithLogs("hostile-passwd")
			sb := e.RunPod(pod, "")
			passwd := filepath.Join(e.Rootfs, "etc/passwd")
			good, err := os.ReadFile(passwd)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(passwd); err != nil {
				t.Fatal(err)
			}
			tc.plant(t, e.Rootfs, passwd)

			cfg := runtimetest.ContainerConfig("app", "true")
			cfg.Linux.SecurityContext.RunAsUsername = "tester"
			// Bounded so that a regression fails instead of hanging; the call must end long before.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err = e.Runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: cfg, SandboxConfig: pod})
			if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "/etc/passwd") {
				t.Fatalf("CreateContainer with a hostile /etc/passwd = %v, want FailedPrecondition naming /etc/passwd", err)
			}
			if m := testutil.MountsUnder(filepath.Join(e.Dir, "overlays")); len(m) > 0 {
				t.Errorf("overlays left mounted by the failed create: %v", m)
			}
			if ents, _ := os.ReadDir(filepath.Join(e.Dir, "overlays")); len(ents) > 0 {
				t.Errorf("rootfs dirs left by the failed create: %d", len(ents))
			}

			if err := os.Remove(passwd); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(passwd, good, 0o644); err != nil {
				t.Fatal(err)
			}
			e.CreateContainer(sb, pod, cfg)
		})
	}
}

// withFaultRuntime makes the default handler (runc) the fault-injecting wrapper.
func withFaultRuntime(f *faultRuntime) runtimetest.Option {
	return runtimetest.WithConfig(func(c *engine.Config) {
		h := c.Handlers["runc"]
		h.Path = f.Path
		c.Handlers["runc"] = h
	})
}

// A create that fails in the runtime, or that its client abandons while the runtime hangs, is
// undone entirely: the hung runtime call and the monitor are killed, the rootfs unmounted, the
// bundle and record gone, and a retry of the same name succeeds.
func TestCreateContainerRollback(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode string
		// createTimeout, when set, is the server's bound on a create whose client sets none.
		createTimeout time.Duration
		// end makes the first create end, given the PID of the faulting runtime call.
		end func(t *testing.T, cancel context.CancelFunc, done <-chan error)
	}{
		{name: "runtime create fails", mode: "fail", end: func(t *testing.T, cancel context.CancelFunc, done <-chan error) {
			if err := <-done; err == nil {
				t.Fatal("CreateContainer succeeded although the runtime's create failed")
			}
		}},
		{name: "client gives up while the runtime hangs", mode: "hang", end: func(t *testing.T, cancel context.CancelFunc, done <-chan error) {
			cancel()
			if err := <-done; status.Code(err) != codes.Canceled {
				t.Fatalf("abandoned CreateContainer = %v, want Canceled", err)
			}
		}},
		{name: "runtime hangs and the client set no deadline", mode: "hang", createTimeout: 5 * time.Second, end: func(t *testing.T, cancel context.CancelFunc, done <-chan error) {
			select {
			case err := <-done:
				if status.Code(err) != codes.DeadlineExceeded {
					t.Fatalf("CreateContainer past the server's deadline = %v, want DeadlineExceeded", err)
				}
			case <-time.After(time.Minute): // far past the server's bound: a regression, not a slow machine
				t.Fatal("CreateContainer with a hung runtime never returned")
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fault := newFaultRuntime(t, tc.mode)
			e := runtimetest.Start(t, withFaultRuntime(fault), runtimetest.WithConfig(func(c *engine.Config) { c.CreateTimeout = tc.createTimeout }))
			pod := e.PodWithLogs("rollback")
			sb := e.RunPod(pod, "")
			cfg := runtimetest.ContainerConfig("app", "true")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := e.Runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: cfg, SandboxConfig: pod})
				done <- err
			}()
			faulting := fault.waitTripped(t)
			tc.end(t, cancel, done)

			// The kubelet retries the same name; it must succeed once the undo is done.
			var id string
			deadline := time.Now().Add(time.Minute)
			for id == "" {
				resp, err := e.Runtime.CreateContainer(e.Ctx(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: cfg, SandboxConfig: pod})
				switch {
				case err == nil:
					id = resp.ContainerId
				case status.Code(err) != codes.AlreadyExists || time.Now().After(deadline):
					t.Fatalf("retry of the same name: %v", err)
				default:
					time.Sleep(10 * time.Millisecond)
				}
			}
			waitGone(t, faulting)
			ents, _ := os.ReadDir(filepath.Join(e.Dir, "overlays"))
			if len(ents) != 1 || ents[0].Name() != id {
				t.Errorf("rootfs dirs after the retry: %v, want only %s", ents, id)
			}
			ents, _ = os.ReadDir(filepath.Join(e.Config.Root, "containers"))
			for _, ent := range ents {
				if !strings.HasPrefix(ent.Name(), id) {
					t.Errorf("bundle or record of the failed create left: %s", ent.Name())
				}
			}
			if p := testutil.ProcessesMentioning(filepath.Join(e.Config.Root, "containers")); len(p) != 1 {
				t.Errorf("processes naming bundles: %v, want the retry's monitor only", p)
			}
		})
	}
}
