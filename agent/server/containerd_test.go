package server_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/nodelet/nodelet/internal/testimage"
	"github.com/nodelet/nodelet/internal/testutil"
)

// TestAgainstContainerd runs the same scenario on Debian's containerd: the API must work with any
// CRI runtime (containerd's streaming server, and its lack of ListPodSandboxStats in 1.6).
func TestAgainstContainerd(t *testing.T) {
	testutil.Require(t, "containerd", "runc")
	base, err := os.MkdirTemp("", "nlapictrd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	testutil.CheckNoLeaks(t, base)
	pause := testimage.MustBusybox(testimage.WithCmd("sleep", "2147483647"))
	reg := testimage.Serve(t, map[string]ggcrv1.Image{"busybox:latest": testimage.MustBusybox(), "pause:3.9": pause})

	// Both the test's registry and registry.k8s.io (for the sandbox image) lead to the loopback one.
	for _, h := range []string{reg, "registry.k8s.io"} {
		dir := filepath.Join(base, "certs.d", h)
		os.MkdirAll(dir, 0o755)
		hosts := fmt.Sprintf("server = \"http://%s\"\n\n[host.\"http://%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", reg, reg)
		if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(base, "net.d"), 0o755)
	sock := filepath.Join(base, "containerd.sock")
	cfg := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.internal.v1.tracing"]
[grpc]
  address = %[3]q
[ttrpc]
  address = "%[3]s.ttrpc"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[4]q
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = %[5]q
`, filepath.Join(base, "root"), filepath.Join(base, "state"), sock, filepath.Join(base, "net.d"), filepath.Join(base, "certs.d"))
	cfgPath := filepath.Join(base, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, _ := os.Create(filepath.Join(base, "containerd.log"))
	cmd := exec.Command(testutil.LookPath("containerd"), "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		testutil.StopGroup(cmd, 20*time.Second)
		testutil.KillProcessesMentioning(base)
		testutil.UnmountUnder(base)
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("containerd log:\n%s", b)
		}
	})
	apiScenario(t, "unix://"+sock, reg+"/busybox:latest", base, true)
}
