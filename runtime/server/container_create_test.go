package server_test

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

	"github.com/nodelet/nodelet/internal/testutil"
	"github.com/nodelet/nodelet/runtime/server/servertest"
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
			e := servertest.Start(t)
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

			cfg := servertest.ContainerConfig("app", "true")
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
