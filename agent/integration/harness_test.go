// Package integration runs the agent against real CRI runtimes started by the test: Debian's
// containerd (with its CRI plugin) and nodelet's own runtime binary. Images are built from the host's
// busybox-static and served by an in-process registry on loopback. The agent reaches each runtime
// only through its CRI socket, as it would in production.
package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/crirt"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// pushBusybox pushes a busybox image under ref with the given default command.
func pushBusybox(t testing.TB, layer ggcrv1.Layer, ref string, cmd ...string) {
	t.Helper()
	pushImage(t, ref, func(c *ggcrv1.Config) { c.Cmd = cmd }, layer)
}

// pushImage pushes an image of layers under ref, its config (PATH=/bin) changed by config.
func pushImage(t testing.TB, ref string, config func(*ggcrv1.Config), layers ...ggcrv1.Layer) {
	t.Helper()
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Config.Env = []string{"PATH=/bin"}
	config(&cf.Config)
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatalf("push %s: %v", ref, err)
	}
}

// criRuntime is a runtime under test, reachable at Endpoint.
type criRuntime struct {
	Name     string
	Endpoint string
	Conn     *grpc.ClientConn
	Runtime  runtimeapi.RuntimeServiceClient
	dir      string
	cmd      *exec.Cmd
}

func dialCRI(t testing.TB, endpoint string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// startContainerd runs Debian's containerd (crirt.StartContainerd) with its files under dir.
func startContainerd(t testing.TB, dir, reg string, mirrored ...string) *criRuntime {
	t.Helper()
	cmd, endpoint := crirt.StartContainerd(t, dir, reg, mirrored...)
	r := &criRuntime{Name: "containerd", Endpoint: endpoint, dir: dir, cmd: cmd}
	r.Conn = dialCRI(t, r.Endpoint)
	r.Runtime = runtimeapi.NewRuntimeServiceClient(r.Conn)
	t.Cleanup(func() { r.stop(t) })
	r.waitReady(t, filepath.Join(dir, "containerd.log"))
	return r
}

// waitReady waits for Version to answer; the limit guards against a hang only.
func (r *criRuntime) waitReady(t testing.TB, logPath string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := r.Runtime.Version(ctx, &runtimeapi.VersionRequest{})
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("%s did not come up: %v\n%s", r.Name, err, tail(string(b), 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// removeAll stops and removes every sandbox (and so every container) through CRI.
func (r *criRuntime) removeAll(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sbs, err := r.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Logf("cleanup: list sandboxes: %v", err)
		return
	}
	for _, sb := range sbs.Items {
		if _, err := r.Runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			t.Logf("cleanup: stop sandbox %s: %v", sb.Id, err)
		}
		if _, err := r.Runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			t.Logf("cleanup: remove sandbox %s: %v", sb.Id, err)
		}
	}
}

// stop removes what the runtime runs, stops the daemon (SIGTERM, then SIGKILL to its group), kills
// any process still naming its dir (shims it started), and unmounts what is left under the dir.
func (r *criRuntime) stop(t testing.TB) {
	if r.cmd == nil {
		return
	}
	r.removeAll(t)
	r.Conn.Close()
	testutil.StopGroup(r.cmd, 20*time.Second)
	r.cmd = nil
	testutil.KillProcessesMentioning(r.dir)
	testutil.UnmountUnder(r.dir)
}

func TestMain(m *testing.M) {
	if js := os.Getenv(childAgentEnv); js != "" {
		os.Exit(runChildAgent(js))
	}
	code := m.Run()
	crirt.RemoveBinary()
	os.Exit(code)
}

// startNodeletRuntime runs `nodelet runtime` with its own root, state and socket under dir, pulling
// the mirrored registries' images from the loopback registry, without pod networking.
func startNodeletRuntime(t testing.TB, dir, reg string, mirrored ...string) *criRuntime {
	return startNodeletRuntimeWith(t, dir, reg, []string{"--no-network"}, mirrored...)
}

func startNodeletRuntimeWith(t testing.TB, dir, reg string, netArgs []string, mirrored ...string) *criRuntime {
	t.Helper()
	testutil.Require(t, "runc", "conmon")
	bin := crirt.Binary(t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "nodelet.sock")
	args := append([]string{"runtime", "--root", filepath.Join(dir, "root"), "--state", filepath.Join(dir, "state"),
		"--listen", "unix://" + sock, "--cgroup-parent", "/nodelet-e2e-runtime"}, netArgs...)
	for _, h := range mirrored {
		args = append(args, "--registry-mirror", h+"=http://"+reg)
	}
	logPath := filepath.Join(dir, "nodelet.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	// The daemon has its own copy; the test's would keep the log's filesystem busy (a test that
	// unmounts it) until the garbage collector happened to close it.
	logf.Close()
	if err != nil {
		t.Fatal(err)
	}
	r := &criRuntime{Name: "nodelet", Endpoint: "unix://" + sock, dir: dir, cmd: cmd}
	r.Conn = dialCRI(t, r.Endpoint)
	r.Runtime = runtimeapi.NewRuntimeServiceClient(r.Conn)
	t.Cleanup(func() {
		r.stop(t)
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("nodelet runtime log:\n%s", tail(string(b), 40))
		}
	})
	r.waitReady(t, logPath)
	return r
}

// onContainerd and onNodelet are the two runtimes newEnv starts the agent against; both send
// registry.k8s.io (the sandbox image's home) to the test's registry.
func onContainerd(t testing.TB, dir, reg string) *criRuntime {
	return startContainerd(t, dir, reg, "registry.k8s.io")
}

func onNodelet(t testing.TB, dir, reg string) *criRuntime {
	return startNodeletRuntime(t, dir, reg, "registry.k8s.io")
}

// onNodeletWithNetwork is onNodelet with a CNI bridge of the test's own (name and subnet from the
// test process's PID, so parallel test binaries do not meet), without masquerading or port
// mappings, so nothing is added to the host's iptables; the bridge goes at cleanup.
func onNodeletWithNetwork(t testing.TB, dir, reg string) *criRuntime {
	testutil.Require(t, "cni:bridge", "cni:host-local", "cni:loopback", "ip")
	id := os.Getpid() % 250
	bridge, subnet := fmt.Sprintf("nle2e%d", id), fmt.Sprintf("10.251.%d.0/24", id)
	conf := filepath.Join(dir, "cni")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	list := fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "nodelet-e2e-%[1]s", "plugins": [{"type": "bridge", "bridge": %[1]q,
  "isGateway": true, "ipMasq": false, "ipam": {"type": "host-local", "ranges": [[{"subnet": %[2]q}]], "dataDir": %[3]q}}]}`,
		bridge, subnet, filepath.Join(dir, "ipam"))
	if err := os.WriteFile(filepath.Join(conf, "10-e2e.conflist"), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { exec.Command("ip", "link", "del", bridge).Run() })
	return startNodeletRuntimeWith(t, dir, reg, []string{"--cni-conf-dir", conf, "--no-default-network"}, "registry.k8s.io")
}

func bg() context.Context { return context.Background() }
