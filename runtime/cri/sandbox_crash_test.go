package cri_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime"
	"github.com/nodelet/nodelet/runtime/cni"
	"github.com/nodelet/nodelet/runtime/config"
	"github.com/nodelet/nodelet/runtime/engine"
	"github.com/nodelet/nodelet/test/harness/runtimetest"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// The crash tests run the daemon in a child process (this test binary, re-executed) and SIGKILL
// it, then recover in-process on the same dirs: what a real crash leaves (pins, mounts, an
// orphaned catatonit, a record cut short) is what recovery sees.

const crashDaemonEnv = "NODELET_SANDBOX_CRASH_DAEMON"

type crashDaemonConfig struct {
	Root, State, CgroupParent, Endpoint, Catatonit, Runc string
	// RuncRoot is runc's --root, the parent's, so each sees the other's containers.
	RuncRoot string
	// HangInAdd makes the network plugin write the sandbox ID to this file and never return.
	HangInAdd string
	// Conmon and ImageStore, when set, let the daemon create containers from a real image store.
	Conmon, ImageStore string
}

// hangingNetwork stands for a CNI ADD the daemon dies in.
type hangingNetwork struct{ marker string }

func (h hangingNetwork) SetUpPod(ctx context.Context, pod cni.PodNetwork) (*cni.Result, error) {
	_ = os.WriteFile(h.marker, []byte(pod.SandboxID), 0o644)
	select {}
}
func (h hangingNetwork) TearDownPod(ctx context.Context, pod cni.PodNetwork) error { return nil }
func (h hangingNetwork) Status() error                                             { return nil }

// TestHelperSandboxCrashDaemon is the child daemon; run directly, it does nothing.
func TestHelperSandboxCrashDaemon(t *testing.T) {
	raw := os.Getenv(crashDaemonEnv)
	if raw == "" {
		return
	}
	var c crashDaemonConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatal(err)
	}
	cfg := engine.Config{
		Root: c.Root, State: c.State, CgroupParent: c.CgroupParent, CatatonitPath: c.Catatonit,
		DefaultHandler: "runc",
		Handlers:       map[string]engine.Handler{"runc": {Name: "runc", Path: c.Runc, Root: c.RuncRoot}},
		Logger:         slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}
	cfg.ConmonPath = c.Conmon
	var deps runtime.Deps
	if c.HangInAdd != "" {
		deps.Network = hangingNetwork{c.HangInAdd}
	}
	// Without a store of the test's, the daemon's own is an empty one beside its records.
	images := filepath.Join(c.Root, "images")
	if c.ImageStore != "" {
		images = c.ImageStore
	}
	rt, err := runtime.New(config.Config{Engine: cfg, ImageDir: images, Listen: c.Endpoint}, deps)
	if err != nil {
		t.Fatal(err)
	}
	_ = rt.Run(context.Background()) // until SIGKILL
}

// startCrashDaemon serves e's dirs from a child process and returns a client and the process.
func startCrashDaemon(t *testing.T, e *runtimetest.Env, hangMarker string) (runtimeapi.RuntimeServiceClient, *exec.Cmd) {
	t.Helper()
	return startCrashDaemonWith(t, e, crashDaemonConfig{Runc: testutil.LookPath("runc"), HangInAdd: hangMarker})
}

// startCrashDaemonWith is startCrashDaemon with c's runtime, monitor and image store; the dirs
// and endpoint are e's.
func startCrashDaemonWith(t *testing.T, e *runtimetest.Env, c crashDaemonConfig) (runtimeapi.RuntimeServiceClient, *exec.Cmd) {
	t.Helper()
	e.Stop()
	c.Root, c.State, c.CgroupParent, c.Endpoint = e.Config.Root, e.Config.State, e.Config.CgroupParent, e.Endpoint
	c.Catatonit, c.RuncRoot = e.Config.CatatonitPath, e.Config.Handlers["runc"].Root
	raw, _ := json.Marshal(c)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSandboxCrashDaemon$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDaemonEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	conn, err := grpc.NewClient(e.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	// Wait (bounded, for a hung child) until it serves.
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := rt.Version(ctx, &runtimeapi.VersionRequest{}, grpc.WaitForReady(true))
		cancel()
		if err == nil {
			break
		}
		if i == 60 {
			t.Fatalf("child daemon does not serve: %v", err)
		}
	}
	return rt, cmd
}

func killDaemon(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
}

func TestSandboxCrashDuringRun(t *testing.T) {
	net := newFakeNetwork()
	e := runtimetest.Start(t, runtimetest.WithNetwork(net))
	marker := filepath.Join(e.Dir, "adding")
	rt, daemon := startCrashDaemon(t, e, marker)

	cfg := withNamespaces(runtimetest.PodConfig("cut-short"), runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD)
	done := make(chan error, 1)
	go func() {
		_, err := rt.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: cfg})
		done <- err
	}()
	var id string
	for i := 0; id == ""; i++ {
		if b, err := os.ReadFile(marker); err == nil && len(b) > 0 {
			id = string(b)
		}
		if i == 6000 {
			t.Fatal("the child daemon never reached CNI ADD")
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Mid-ADD the sandbox has everything but its network: prove it, then kill the daemon.
	inits := processesInNetNS(filepath.Join(e.Config.State, "ns/net", id))
	if len(inits) == 0 || len(testutil.MountsUnder(e.Config.State)) == 0 {
		t.Fatalf("mid-ADD: inits %v, mounts %v", inits, testutil.MountsUnder(e.Config.State))
	}
	killDaemon(t, daemon)
	if err := <-done; err == nil {
		t.Fatal("RunPodSandbox succeeded although its daemon was killed")
	}

	e.Restart()
	if got := readyState(t, e); len(got) != 0 {
		t.Errorf("a sandbox cut short is listed: %v", got)
	}
	if adds, dels := net.counts(id); adds != 0 || dels != 1 {
		t.Errorf("recovery of a sandbox killed mid-ADD: ADD %d, DEL %d, want 0 and 1", adds, dels)
	}
	// Recovery waits for what it kills to leave: no wait here.
	for _, pid := range inits {
		if !gone(pid) {
			t.Errorf("the pod init %d of the sandbox cut short still runs", pid)
		}
	}
	assertGone(t, e, sandboxInfo{
		NetNSPath: filepath.Join(e.Config.State, "ns/net", id), PIDNSPath: filepath.Join(e.Config.State, "ns/pid", id),
		ShmPath: filepath.Join(e.Config.State, "pods", id), SandboxDir: filepath.Join(e.Config.Root, "pods", id),
		CgroupParent: e.Config.CgroupParent + "/" + id,
	})
	// The kubelet retries the same attempt; its name is free.
	e.RunPod(cfg, "")
}

func containsZombie(stat []byte) bool {
	for i := len(stat) - 1; i > 0; i-- {
		if stat[i] == ')' {
			return i+2 < len(stat) && stat[i+2] == 'Z'
		}
	}
	return false
}

func TestSandboxCrashWithPodsRunning(t *testing.T) {
	e := runtimetest.Start(t)
	rt, daemon := startCrashDaemon(t, e, "")
	cfg := withNamespaces(runtimetest.PodConfig("survivor"), runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD)
	resp, err := rt.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	id := resp.PodSandboxId
	killDaemon(t, daemon)

	e.Restart()
	st, info := podStatus(t, e, id)
	if st.State != runtimeapi.PodSandboxState_SANDBOX_READY || info.PID == 0 {
		t.Fatalf("after the daemon's SIGKILL: %v %+v", st.State, info)
	}
	cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(info.PID) + "/cmdline")
	if len(cmdline) == 0 {
		t.Fatalf("catatonit %d died with the daemon", info.PID)
	}
	if _, err := e.Runtime.RemovePodSandbox(e.Ctx(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile("/proc/" + strconv.Itoa(info.PID) + "/stat"); err == nil && !containsZombie(b) {
		t.Errorf("catatonit %d survived RemovePodSandbox", info.PID)
	}
	assertGone(t, e, info)
}
