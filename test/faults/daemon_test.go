package faults

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

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/testimage"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// image is the busybox the pods run, served by the test's registry under docker.io's mirror.
const image = "docker.io/library/busybox:faults"

// daemon is a `nodelet runtime` or `nodelet up` with every path, its cgroup parent, its bridge and
// its subnet of its own, that a test can SIGKILL and start again on the same dirs.
type daemon struct {
	t                      *testing.T
	base, root, state      string
	sock, cniConf, ipamDir string
	netName, bridge        string
	cgroup                 string
	args                   []string
	cmd                    *exec.Cmd
	logPath                string
	conn                   *grpc.ClientConn
	rs                     runtimeapi.RuntimeServiceClient
	is                     runtimeapi.ImageServiceClient
}

// newDaemon prepares (does not start) `nodelet VERB` with a private CNI network on bridge/subnet.
// Its cleanup takes down whatever the test left, whether or not the test's own checks passed.
func newDaemon(t *testing.T, verb, bridge, subnet string, extra ...string) *daemon {
	t.Helper()
	testutil.Require(t, "runc", "conmon", "busybox", "ip", "cni:bridge", "cni:host-local", "cni:loopback")
	base := t.TempDir()
	d := &daemon{t: t, base: base, root: filepath.Join(base, "root"), state: filepath.Join(base, "state"),
		cniConf: filepath.Join(base, "cni"), ipamDir: filepath.Join(base, "ipam"),
		netName: "faults-" + bridge, bridge: bridge, logPath: filepath.Join(base, "daemon.log"),
		cgroup: fmt.Sprintf("/nodelet-faults-%s-%d", bridge, os.Getpid())}
	d.sock = filepath.Join(d.state, "rt.sock")
	if err := os.MkdirAll(d.cniConf, 0o755); err != nil {
		t.Fatal(err)
	}
	// No masquerading and no port mapping: nothing is added to the host's iptables.
	list := fmt.Sprintf(`{"cniVersion": "1.0.0", "name": %q, "plugins": [{"type": "bridge", "bridge": %q,
  "isGateway": true, "ipMasq": false, "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "dataDir": %q}}]}`,
		d.netName, bridge, subnet, d.ipamDir)
	if err := os.WriteFile(filepath.Join(d.cniConf, "10-faults.conflist"), []byte(list), 0o644); err != nil {
		t.Fatal(err)
	}
	host := testimage.Serve(t, map[string]v1.Image{"library/busybox:faults": testimage.MustBusybox()})
	d.args = append([]string{verb, "--root", d.root, "--state", d.state, "--listen", "unix://" + d.sock,
		"--cni-conf-dir", d.cniConf, "--no-default-network", "--cgroup-parent", d.cgroup,
		"--registry-mirror", "docker.io=http://" + host, "--log-level", "debug"}, extra...)
	t.Cleanup(d.tidy)
	return d
}

// start runs the daemon and waits until it answers CRI; the limit guards a hang only.
func (d *daemon) start() {
	d.t.Helper()
	logf, err := os.OpenFile(d.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		d.t.Fatal(err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "=== start %s\n", time.Now().UTC().Format(time.RFC3339Nano))
	d.cmd = exec.Command(nodeletBin, d.args...)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	if d.conn, err = grpc.NewClient("unix://"+d.sock, grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		d.t.Fatal(err)
	}
	d.rs, d.is = runtimeapi.NewRuntimeServiceClient(d.conn), runtimeapi.NewImageServiceClient(d.conn)
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := d.rs.Version(ctx, &runtimeapi.VersionRequest{})
		cancel()
		if err == nil {
			return
		}
		if d.cmd.ProcessState != nil || syscall.Kill(d.cmd.Process.Pid, 0) != nil || time.Now().After(deadline) {
			d.t.Fatalf("%s did not come up: %v\n%s", d.args[0], err, d.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill SIGKILLs the daemon alone, as the OOM killer would: its conmons and containers live on.
func (d *daemon) kill() {
	d.t.Helper()
	if err := d.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		d.t.Fatalf("kill: %v", err)
	}
	d.cmd.Wait()
	d.conn.Close()
	d.cmd = nil
}

// restart is kill (unless the test killed it already), then start on the same dirs once the runc calls the dead daemon had begun
// have ended: the truth the new daemon reports must not move under the test's checks.
func (d *daemon) restart() {
	d.t.Helper()
	if d.cmd != nil {
		d.kill()
	}
	deadline := time.Now().Add(time.Minute)
	for len(d.runcCalls()) > 0 {
		if time.Now().After(deadline) {
			d.t.Fatalf("runc calls of the dead daemon never ended: %v", d.runcCalls())
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.start()
}

// runcCalls lists runc processes working on this daemon's containers.
func (d *daemon) runcCalls() []string {
	var out []string
	for _, p := range testutil.ProcessesMentioning(d.state) {
		if f := strings.Fields(p); len(f) > 1 && filepath.Base(f[1]) == "runc" {
			out = append(out, p)
		}
	}
	return out
}

// pid is the running daemon's.
func (d *daemon) pid() int { return d.cmd.Process.Pid }

// stop ends the daemon with SIGTERM (SIGKILL after a grace period).
func (d *daemon) stop() {
	if d.cmd == nil {
		return
	}
	d.conn.Close()
	testutil.StopGroup(d.cmd, 30*time.Second)
	d.cmd = nil
}

// tidy leaves the host as it was whatever happened: pods removed through CRI when the daemon
// still answers, then the daemon stopped and anything left killed, unmounted and deleted.
func (d *daemon) tidy() {
	if d.cmd != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		removeAllPods(ctx, d.rs)
		cancel()
	}
	d.stop()
	if d.t.Failed() {
		d.t.Logf("daemon log (tail):\n%s", d.logTail())
	}
	testutil.KillProcessesMentioning(d.base)
	for _, pid := range cgroupProcs(d.cgroup) {
		syscall.Kill(pid, syscall.SIGKILL)
	}
	testutil.UnmountUnder(d.base)
	exec.Command("ip", "link", "del", d.bridge).Run()
	for _, dir := range cgroupDirs(d.cgroup) {
		testutil.RemoveCgroupTree(dir)
	}
}

func (d *daemon) logTail() string {
	b, _ := os.ReadFile(d.logPath)
	lines := strings.Split(string(b), "\n")
	return strings.Join(lines[max(0, len(lines)-60):], "\n")
}

// pull fetches the test image through the daemon.
func (d *daemon) pull() {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := d.is.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}}); err != nil {
		d.t.Fatalf("pull %s: %v", image, err)
	}
}

// removeAllPods stops and removes every sandbox (and so every container) the runtime lists.
func removeAllPods(ctx context.Context, rs runtimeapi.RuntimeServiceClient) []error {
	resp, err := rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return []error{fmt.Errorf("list sandboxes: %w", err)}
	}
	var errs []error
	for _, sb := range resp.Items {
		if _, err := rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stop sandbox %s: %w", sb.Id, err))
		}
		if _, err := rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", sb.Id, err))
		}
	}
	return errs
}

// cgroupHierarchies are the mounted cgroup trees: the v1 controllers and the unified one, or the v2 root.
func cgroupHierarchies() []string {
	out := []string{"/sys/fs/cgroup"}
	ents, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	return out
}

// cgroupDirs are the cgroup parent's dir in every hierarchy that has it.
func cgroupDirs(parent string) []string {
	var out []string
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, parent)
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			out = append(out, dir)
		}
	}
	return out
}

// cgroupProcs lists every process in the cgroup parent's tree, in any hierarchy.
func cgroupProcs(parent string) []int {
	seen := map[int]bool{}
	var out []int
	for _, dir := range cgroupDirs(parent) {
		filepath.WalkDir(dir, func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || e.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				var pid int
				if _, err := fmt.Sscan(f, &pid); err == nil && !seen[pid] {
					seen[pid] = true
					out = append(out, pid)
				}
			}
			return nil
		})
	}
	return out
}
