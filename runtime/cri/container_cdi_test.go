package cri_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/cdi"
	"github.com/nodelet/nodelet/runtime/engine"
	"github.com/nodelet/nodelet/test/harness/runtimetest"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// TestCDIDevicesReachTheContainer: a container naming a CDI device (CRI's cdi_devices, as the
// kubelet fills it from a device plugin) runs with the device's edits, on runc and on crun; a
// device no spec names fails the create with InvalidArgument, naming it.
func TestCDIDevicesReachTheContainer(t *testing.T) {
	testutil.Require(t)
	specDir, hostDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(hostDir, "firmware"), []byte("fw-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := `cdiVersion: "0.6.0"
kind: vendor.example/accel
devices:
- name: a0
  containerEdits:
    env: ["ACCEL=a0"]
    mounts:
    - {hostPath: ` + hostDir + `, containerPath: /opt/accel, options: [ro, bind]}
`
	if err := os.WriteFile(filepath.Join(specDir, "accel.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	inj, err := cdi.New([]string{specDir})
	if err != nil {
		t.Fatal(err)
	}
	e := runtimetest.Start(t, runtimetest.WithConfig(func(c *engine.Config) { c.Devices = inj }))
	for _, handler := range []string{"runc", "crun"} {
		if _, ok := e.Config.Handlers[handler]; !ok {
			t.Fatalf("handler %s is not installed: apt-get install -y %s (or hack/install.sh)", handler, handler)
		}
		t.Run(handler, func(t *testing.T) {
			pod := runtimetest.PodConfig("cdi-" + handler)
			sb := e.RunPod(pod, handler)
			cfg := runtimetest.ContainerConfig("dev", "sleep", "1000")
			cfg.CDIDevices = []*runtimeapi.CDIDevice{{Name: "vendor.example/accel=a0"}}
			id := e.RunContainer(sb, pod, cfg)
			resp, err := e.Runtime.ExecSync(e.Ctx(), &runtimeapi.ExecSyncRequest{ContainerId: id,
				Cmd: []string{"sh", "-c", "echo $ACCEL; cat /opt/accel/firmware"}, Timeout: 60})
			if err != nil || resp.ExitCode != 0 {
				t.Fatalf("exec: %v %+v", err, resp)
			}
			if got := strings.TrimSpace(string(resp.Stdout)); got != "a0\nfw-1" {
				t.Errorf("in the container: %q", got)
			}

			bad := runtimetest.ContainerConfig("nodev", "true")
			bad.CDIDevices = []*runtimeapi.CDIDevice{{Name: "vendor.example/accel=a9"}}
			_, err = e.Runtime.CreateContainer(e.Ctx(), &runtimeapi.CreateContainerRequest{PodSandboxId: sb, Config: bad, SandboxConfig: pod})
			wantCode(t, err, codes.InvalidArgument)
			if err == nil || !strings.Contains(err.Error(), "vendor.example/accel=a9") {
				t.Errorf("an unknown device: %v", err)
			}
		})
	}
}
