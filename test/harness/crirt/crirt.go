// Package crirt starts nodelet's own runtime binary (or Debian's containerd) for the agent's
// end-to-end and integration tests and serves them busybox images from an in-process registry.
// The tests reach the runtime only over its CRI socket, as the agent does; nothing here imports
// the runtime's packages.
package crirt

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

// Mirrored is the registry host the images are named under; the runtime pulls it from the loopback registry.
const Mirrored = "registry.e2e.test"

// Runtime is a running `nodelet runtime`.
type Runtime struct {
	Endpoint string
	Conn     *grpc.ClientConn
	RS       runtimeapi.RuntimeServiceClient
	IS       runtimeapi.ImageServiceClient
	Root     string
	dir      string
	cmd      *exec.Cmd
	registry string
	layer    ggcrv1.Layer
	cgroup   string
}

var build struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Binary builds the nodelet binary once per test process and returns its path. The agent's tests
// reach nodelet's runtime only as a separate process over its CRI socket, never by importing it.
func Binary(t testing.TB) string {
	build.once.Do(func() {
		dir, err := os.MkdirTemp("", "nodelet-mgr-bin-")
		if err != nil {
			build.err = err
			return
		}
		build.dir = dir
		build.path = filepath.Join(dir, "nodelet")
		cmd := exec.Command("go", "build", "-o", build.path, "github.com/nodelet/nodelet/cmd/nodelet")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build ./cmd/nodelet: %v\n%s", err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

// RemoveBinary deletes what Binary built; a TestMain calls it after m.Run.
func RemoveBinary() {
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
}

// Start runs the runtime with its root under root (may be a small filesystem of the test's) and its
// state under a temp dir, without pod networking; everything is stopped and unmounted at cleanup.
func Start(t testing.TB, root string) *Runtime {
	t.Helper()
	return start(t, root, "", "")
}

// StartWithNetwork is Start with a CNI bridge network of its own (bridge name and subnet that no
// other test uses), so pods get an IP of their own; the bridge is deleted at cleanup.
func StartWithNetwork(t testing.TB, root, bridge, subnet string) *Runtime {
	t.Helper()
	testutil.Require(t, "cni:bridge", "cni:host-local", "cni:loopback", "ip")
	return start(t, root, bridge, subnet)
}

func start(t testing.TB, root, bridge, subnet string) *Runtime {
	testutil.Require(t, "runc", "conmon", "busybox")
	bin := Binary(t)
	dir := t.TempDir()
	r := &Runtime{dir: dir, Root: root, registry: ServeRegistry(t)}
	sock := filepath.Join(dir, "rt.sock")
	logPath := filepath.Join(dir, "runtime.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	r.cgroup = fmt.Sprintf("/nodelet-mgr-e2e-%d", os.Getpid())
	args := []string{"runtime", "--root", root, "--state", filepath.Join(dir, "state"), "--listen", "unix://" + sock,
		"--cgroup-parent", r.cgroup, "--registry-mirror", Mirrored + "=http://" + r.registry}
	if bridge == "" {
		args = append(args, "--no-network")
	} else {
		conf := filepath.Join(dir, "cni")
		os.MkdirAll(conf, 0o755)
		// No masquerading and no port mapping: nothing is added to the host's iptables.
		list := fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "mgr-e2e-%[1]s", "plugins": [{"type": "bridge", "bridge": %[1]q,
  "isGateway": true, "ipMasq": false, "ipam": {"type": "host-local", "ranges": [[{"subnet": %[2]q}]], "dataDir": %[3]q}}]}`,
			bridge, subnet, filepath.Join(dir, "ipam"))
		if err := os.WriteFile(filepath.Join(conf, "10-mgr-e2e.conflist"), []byte(list), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--cni-conf-dir", conf, "--no-default-network")
		t.Cleanup(func() { exec.Command("ip", "link", "del", bridge).Run() })
	}
	r.cmd = exec.Command(bin, args...)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = r.cmd.Start()
	logf.Close() // the daemon has its own copy; ours would keep the log's filesystem busy
	if err != nil {
		t.Fatal(err)
	}
	r.Endpoint = "unix://" + sock
	r.Conn, err = grpc.NewClient(r.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	r.RS, r.IS = runtimeapi.NewRuntimeServiceClient(r.Conn), runtimeapi.NewImageServiceClient(r.Conn)
	t.Cleanup(func() {
		r.stop(t)
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			lines := strings.Split(string(b), "\n")
			t.Logf("runtime log (tail):\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})
	deadline := time.Now().Add(60 * time.Second) // guards a hang only
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := r.RS.Version(ctx, &runtimeapi.VersionRequest{})
		cancel()
		if err == nil {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("runtime did not come up: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *Runtime) stop(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if sbs, err := r.RS.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{}); err == nil {
		for _, sb := range sbs.Items {
			r.RS.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id})
			r.RS.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id})
		}
	}
	r.Conn.Close()
	testutil.StopGroup(r.cmd, 20*time.Second)
	testutil.UnmountUnder(r.dir)
	testutil.UnmountUnder(r.Root)
	// The pods' cgroup parent, in every hierarchy.
	testutil.RemoveCgroupRoot(r.cgroup)
}

// ServeRegistry starts an in-process registry on loopback, closed at cleanup, and returns its host:port.
func ServeRegistry(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: registry.New(registry.Logger(log.New(io.Discard, "", 0))), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

// Push publishes Mirrored/<repo> made of busybox plus, when extra is not nil, a layer holding
// /extra with those bytes (to give images distinct sizes). It returns the image's name.
func (r *Runtime) Push(t testing.TB, repo string, extra []byte) string {
	t.Helper()
	var files map[string][]byte
	if extra != nil {
		files = map[string][]byte{"extra": extra}
	}
	return r.PushFiles(t, repo, files)
}

// PushFiles publishes Mirrored/<repo> made of busybox plus a layer with the given files (paths
// relative to /; those under bin/ are executable).
func (r *Runtime) PushFiles(t testing.TB, repo string, files map[string][]byte) string {
	t.Helper()
	if r.layer == nil {
		r.layer = BusyboxLayer(t)
	}
	img, err := mutate.AppendLayers(empty.Image, r.layer)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) > 0 {
		l := tarLayer(t, files)
		if img, err = mutate.AppendLayers(img, l); err != nil {
			t.Fatal(err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Config.Env = []string{"PATH=/bin"}
	cf.Config.Cmd = []string{"sleep", "3600"}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		t.Fatal(err)
	}
	ref, err := name.ParseReference(r.registry+"/"+repo, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img); err != nil {
		t.Fatalf("push %s: %v", repo, err)
	}
	return Mirrored + "/" + repo
}

func tarLayer(t testing.TB, files map[string][]byte) ggcrv1.Layer {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for n, b := range files {
		mode := int64(0o644)
		if strings.HasPrefix(n, "bin/") {
			mode = 0o755
		}
		tw.WriteHeader(&tar.Header{Name: n, Mode: mode, Size: int64(len(b)), Typeflag: tar.TypeReg})
		tw.Write(b)
	}
	tw.Close()
	return layerOf(t, buf.Bytes())
}

// BusyboxLayer is a layer of the host's busybox-static rootfs, every file owned by root.
func BusyboxLayer(t testing.TB) ggcrv1.Layer {
	root := testutil.BusyboxRootfs(t)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		link := ""
		if fi.Mode()&os.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = rel
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = tw.Write(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tw.Close()
	return layerOf(t, buf.Bytes())
}

// layerOf is the (uncompressed) tar data as an image layer.
func layerOf(t testing.TB, data []byte) ggcrv1.Layer {
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Pod is a sandbox made by RunPod.
type Pod struct {
	ID     string
	Config *runtimeapi.PodSandboxConfig
}

// RunPod starts a sandbox on the host's network with the kubelet's pod labels, logs under logDir.
func (r *Runtime) RunPod(t testing.TB, name, uid, logDir string) Pod {
	t.Helper()
	return r.runPod(t, name, uid, logDir, runtimeapi.NamespaceMode_NODE)
}

// RunPodNetwork starts a sandbox with a network namespace of its own (StartWithNetwork's bridge)
// and returns it with its IP.
func (r *Runtime) RunPodNetwork(t testing.TB, name, uid, logDir string) (Pod, string) {
	t.Helper()
	p := r.runPod(t, name, uid, logDir, runtimeapi.NamespaceMode_POD)
	st, err := r.RS.PodSandboxStatus(context.Background(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: p.ID})
	if err != nil || st.Status.GetNetwork().GetIp() == "" {
		t.Fatalf("sandbox IP: %v %v", st, err)
	}
	return p, st.Status.Network.Ip
}

func (r *Runtime) runPod(t testing.TB, name, uid, logDir string, netMode runtimeapi.NamespaceMode) Pod {
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: uid},
		Labels:       map[string]string{"io.kubernetes.pod.name": name, "io.kubernetes.pod.namespace": "default", "io.kubernetes.pod.uid": uid},
		LogDirectory: logDir,
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: netMode}}},
	}
	resp, err := r.RS.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatalf("run sandbox: %v", err)
	}
	return Pod{ID: resp.PodSandboxId, Config: cfg}
}

// Pull pulls an image and returns its ID.
func (r *Runtime) Pull(t testing.TB, image string) string {
	t.Helper()
	resp, err := r.IS.PullImage(context.Background(), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}})
	if err != nil {
		t.Fatalf("pull %s: %v", image, err)
	}
	return resp.ImageRef
}

// Start creates and starts a container of the pod (its log at <name>/<attempt>.log) and returns its ID.
func (r *Runtime) Start(t testing.TB, p Pod, name string, attempt uint32, image string, cmd []string, mounts ...*runtimeapi.Mount) string {
	t.Helper()
	ctx := context.Background()
	os.MkdirAll(filepath.Join(p.Config.LogDirectory, name), 0o755)
	c, err := r.RS.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: p.ID, SandboxConfig: p.Config,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name, Attempt: attempt},
			Image:    &runtimeapi.ImageSpec{Image: image},
			Command:  cmd,
			Mounts:   mounts,
			LogPath:  fmt.Sprintf("%s/%d.log", name, attempt),
			Labels: map[string]string{"io.kubernetes.pod.uid": p.Config.Metadata.Uid, "io.kubernetes.container.name": name,
				"io.kubernetes.pod.name": p.Config.Metadata.Name, "io.kubernetes.pod.namespace": "default"},
		}})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	if _, err := r.RS.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	return c.ContainerId
}

// Exec runs cmd in the container and returns its stdout, failing on a non-zero exit.
func (r *Runtime) Exec(t testing.TB, id string, cmd ...string) string {
	t.Helper()
	out, code, err := r.ExecCode(id, cmd...)
	if err != nil || code != 0 {
		t.Fatalf("exec %v: exit %d, %v: %s", cmd, code, err, out)
	}
	return out
}

// ExecCode runs cmd in the container and returns its output and exit code.
func (r *Runtime) ExecCode(id string, cmd ...string) (string, int32, error) {
	resp, err := r.RS.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: 30})
	if err != nil {
		return "", -1, err
	}
	return string(resp.Stdout) + string(resp.Stderr), resp.ExitCode, nil
}

// WaitExited waits until the container has exited; the limit guards a hang only.
func (r *Runtime) WaitExited(t testing.TB, id string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s, err := r.RS.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: id})
		if err == nil && s.Status.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s did not exit: %v", id, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// HealthServer builds ./healthserver (static) once and returns the binary, to put in an image.
func HealthServer(t testing.TB) []byte {
	t.Helper()
	health.once.Do(func() {
		dir, err := os.MkdirTemp("", "nodelet-healthserver-")
		if err != nil {
			health.err = err
			return
		}
		defer os.RemoveAll(dir)
		out := filepath.Join(dir, "healthserver")
		cmd := exec.Command("go", "build", "-o", out, "github.com/nodelet/nodelet/test/harness/crirt/healthserver")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			health.err = fmt.Errorf("go build healthserver: %v\n%s", err, b)
			return
		}
		health.bin, health.err = os.ReadFile(out)
	})
	if health.err != nil {
		t.Fatal(health.err)
	}
	return health.bin
}

var health struct {
	once sync.Once
	bin  []byte
	err  error
}

// WaitListening polls, through ExecSync in the container, until a socket in its network namespace
// listens on port; the limit guards a hang only. A server a container starts is not listening
// when StartContainer returns, and a probe or a port-forward that meets a refused connection fails.
func (r *Runtime) WaitListening(t testing.TB, id string, port int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := r.RS.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: id,
			Cmd: []string{"cat", "/proc/net/tcp", "/proc/net/tcp6"}, Timeout: 30})
		if err == nil && testutil.TCPListening(resp.Stdout, port) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s: nothing listens on port %d: %v", id, port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
