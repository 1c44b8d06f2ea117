package server_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	ggcrv1 "github.com/google/go-containerregistry/pkg/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/agent/server"
	"github.com/nodelet/nodelet/agent/server/apiclient"
	"github.com/nodelet/nodelet/test/harness/testimage"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// TestAgainstNodeletRuntime drives the API against the real `nodelet runtime` (runc, conmon, its
// streaming server) over CRI only, as the agent does: logs written by conmon, exec and port-forward
// proxied through the runtime's streaming URLs, stats from its cgroups.
func TestAgainstNodeletRuntime(t *testing.T) {
	testutil.Require(t, "runc", "conmon")
	base, err := os.MkdirTemp("", "nlapi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	testutil.CheckNoLeaks(t, base)
	reg := testimage.Serve(t, map[string]ggcrv1.Image{"busybox:latest": testimage.MustBusybox()})

	bin := filepath.Join(base, "nodelet")
	build := exec.Command("go", "build", "-o", bin, "github.com/nodelet/nodelet/cmd/nodelet")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building nodelet: %v\n%s", err, out)
	}
	sock := filepath.Join(base, "state", "rt.sock")
	logf, _ := os.Create(filepath.Join(base, "daemon.log"))
	daemon := exec.Command(bin, "runtime", "--root", filepath.Join(base, "root"), "--state", filepath.Join(base, "state"),
		"--listen", "unix://"+sock, "--no-network", "--cgroup-parent", "/nodelet-apitest", "--log-level", "debug")
	daemon.Stdout, daemon.Stderr = logf, logf
	// The pod cgroup apiScenario names is the agent's to remove, as with the kubelet; the test
	// plays the agent. Registered first, it runs after the daemon stopped.
	t.Cleanup(func() { testutil.RemoveCgroupRootOrFail(t, "/nodelet-apitest") })
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		daemon.Process.Signal(syscall.SIGTERM)
		daemon.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("daemon log:\n%s", b)
		}
	})
	apiScenario(t, "unix://"+sock, reg+"/busybox:latest", base, false)
}

// apiScenario runs a pod with one container in the runtime at endpoint, as the agent would (its
// labels, its log layout), and checks the API's logs, exec, port-forward, stats and health on it.
// hostNetwork is for runtimes that have no pod network without CNI.
func apiScenario(t *testing.T, endpoint, image, base string, hostNetwork bool) {
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	images := runtimeapi.NewImageServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The daemon needs a moment to make its socket; WaitForReady rides that out.
	if _, err := rt.Version(ctx, &runtimeapi.VersionRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatal(err)
	}
	port := 8080
	if hostNetwork {
		// The host's own network: take a port nobody uses.
		port = testutil.FreePort(t)
	}
	portStr := strconv.Itoa(port)

	if _, err := images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: image}}); err != nil {
		t.Fatal(err)
	}

	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-web-1"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: image}}},
		Status:     v1.PodStatus{Phase: v1.PodRunning},
	}
	labels := map[string]string{"io.kubernetes.pod.name": "web", "io.kubernetes.pod.namespace": "default", "io.kubernetes.pod.uid": "uid-web-1"}
	sbConfig := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: "web", Namespace: "default", Uid: "uid-web-1"},
		Hostname:     "web",
		LogDirectory: filepath.Join(base, "pods", "default_web_uid-web-1"),
		Labels:       labels,
		Linux:        &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "/nodelet-apitest/pod-uid-web-1"},
	}
	if hostNetwork {
		sbConfig.Hostname = "" // the host's UTS namespace too
		sbConfig.Linux.SecurityContext = &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}}
	}
	sb, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbConfig})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		rt.StopPodSandbox(context.Background(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.PodSandboxId})
		rt.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.PodSandboxId})
	}()
	ctrLabels := map[string]string{"io.kubernetes.container.name": "app"}
	for k, v := range labels {
		ctrLabels[k] = v
	}
	ctr, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: sbConfig,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
			Image:    &runtimeapi.ImageSpec{Image: image},
			Command:  []string{"sh", "-c", "echo hello from app; echo oops >&2; exec nc -ll -p " + portStr + " -e cat"},
			LogPath:  "app/0.log",
			Labels:   ctrLabels,
		}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: ctr.ContainerId}); err != nil {
		t.Fatal(err)
	}

	api := server.New(server.Deps{NodeName: "node1", Pods: server.PodList(func() []*v1.Pod { return []*v1.Pod{pod} }), Runtime: rt})
	dir, err := os.MkdirTemp("", "nlapisock")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	l, err := server.ListenUnix(filepath.Join(dir, "agent.sock"))
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- api.ServeUnixListener(sctx, l) }()
	defer func() { stop(); <-served }()
	c, err := apiclient.New("unix://"+filepath.Join(dir, "agent.sock"), nil)
	if err != nil {
		t.Fatal(err)
	}

	// Logs: follow until both lines are there (conmon writes them as the shell runs).
	body, err := c.Logs(ctx, "default", "web", "app", v1.PodLogOptions{Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(body)
	var got []string
	for len(got) < 2 {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("log so far %q: %v", got, err)
		}
		got = append(got, line)
	}
	body.Close()
	// stdout and stderr reach the runtime through two pipes, so their order in the log is not fixed.
	sort.Strings(got)
	if strings.Join(got, "") != "hello from app\noops\n" {
		t.Fatalf("log %q", got)
	}

	var out, errOut bytes.Buffer
	if err := c.Exec(ctx, "default", "web", "app", []string{"sh", "-c", "echo out; echo err >&2"}, apiclient.StreamOptions{Stdout: &out, Stderr: &errOut}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "out\n" || errOut.String() != "err\n" {
		t.Fatalf("exec: %q %q", out.String(), errOut.String())
	}
	err = c.Exec(ctx, "default", "web", "app", []string{"sh", "-c", "exit 3"}, apiclient.StreamOptions{Stdout: io.Discard, Stderr: io.Discard})
	if code, ok := apiclient.ExitCode(err); !ok || code != 3 {
		t.Fatalf("exit code: %v", err)
	}

	// Port-forward into the pod's own network namespace, once nc listens there.
	if err := c.Exec(ctx, "default", "web", "app", []string{"sh", "-c", "while ! netstat -ltn | grep -q :" + portStr + "; do sleep 0.1; done"}, apiclient.StreamOptions{Stdout: io.Discard}); err != nil {
		t.Fatal(err)
	}
	stopPF, ready := make(chan struct{}), make(chan struct{})
	pf, err := c.PortForwarder("default", "web", []string{"0:" + portStr}, []string{"127.0.0.1"}, stopPF, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	pfDone := make(chan error, 1)
	go func() { pfDone <- pf.ForwardPorts() }()
	<-ready
	ports, err := pf.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	nc, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(int(ports[0].Local)))
	if err != nil {
		t.Fatal(err)
	}
	nc.Write([]byte("ping\n"))
	echo, err := bufio.NewReader(nc).ReadString('\n')
	if err != nil || echo != "ping\n" {
		t.Fatalf("through port-forward: %q %v", echo, err)
	}
	nc.Close()
	close(stopPF)
	if err := <-pfDone; err != nil {
		t.Fatal(err)
	}

	var sum statsapi.Summary
	if err := c.GetJSON(ctx, "/stats/summary", nil, &sum); err != nil {
		t.Fatal(err)
	}
	if len(sum.Pods) != 1 || sum.Pods[0].PodRef.Name != "web" || len(sum.Pods[0].Containers) != 1 || sum.Pods[0].Containers[0].Memory == nil {
		t.Fatalf("summary pods: %+v", sum.Pods)
	}
	if b, err := c.Get(ctx, "/healthz", nil); err != nil {
		t.Fatalf("healthz: %v", err)
	} else {
		b.Close()
	}
}
