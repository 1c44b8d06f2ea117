package crirt

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

// StartContainerd runs Debian's containerd with its own root, state and socket under dir, its log at
// dir/containerd.log, the registry hosts reg and mirrored all served by the loopback registry reg,
// and nothing else it does not need. It returns the process (in a group of its own, for
// testutil.StopGroup) and the CRI endpoint; stopping it, and waiting for it to answer, is the
// caller's, since the agent's harnesses each do that their own way.
func StartContainerd(t testing.TB, dir, reg string, mirrored ...string) (*exec.Cmd, string) {
	t.Helper()
	testutil.Require(t, "containerd", "runc")
	for _, h := range append([]string{reg}, mirrored...) {
		hd := filepath.Join(dir, "certs.d", h)
		if err := os.MkdirAll(hd, 0o755); err != nil {
			t.Fatal(err)
		}
		hosts := fmt.Sprintf("server = \"http://%s\"\n\n[host.\"http://%s\"]\n  capabilities = [\"pull\", \"resolve\"]\n", reg, reg)
		if err := os.WriteFile(filepath.Join(hd, "hosts.toml"), []byte(hosts), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A loopback-only network: containerd then reports NetworkReady (so a Node turns Ready) and
	// the tests touch no host interface; their pods use the host's network.
	os.MkdirAll(filepath.Join(dir, "net.d"), 0o755)
	lo := `{"cniVersion": "0.4.0", "name": "lo", "plugins": [{"type": "loopback"}]}`
	if err := os.WriteFile(filepath.Join(dir, "net.d", "10-lo.conflist"), []byte(lo), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "containerd.sock")
	cfg := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs", "io.containerd.internal.v1.tracing", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = %[3]q
[ttrpc]
  address = "%[3]s.ttrpc"
[debug]
  level = "warn"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.9"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
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
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), sock, filepath.Join(dir, "net.d"), filepath.Join(dir, "certs.d"))
	cfgPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "containerd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testutil.LookPath("containerd"), "--config", cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	logf.Close() // containerd has its own copy; ours would keep the log's filesystem busy
	if err != nil {
		t.Fatal(err)
	}
	return cmd, "unix://" + sock
}
