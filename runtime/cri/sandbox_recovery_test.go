package cri_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/cni"
	"github.com/nodelet/nodelet/runtime/engine"
	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/runtime/nsmgr"
	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// fakeNetwork is a NetworkPlugin that counts ADDs and DELs per sandbox and can be made to fail.
type fakeNetwork struct {
	mu      sync.Mutex
	failAdd bool
	adds    map[string]int
	dels    map[string]int
	// inits are the catatonit pids found in the pod's network namespace during ADD.
	inits []int
}

func newFakeNetwork() *fakeNetwork {
	return &fakeNetwork{adds: map[string]int{}, dels: map[string]int{}}
}

func (f *fakeNetwork) SetUpPod(ctx context.Context, pod cni.PodNetwork) (*cni.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.adds[pod.SandboxID]++
	if !nsmgr.IsPinned(pod.NetNSPath) {
		return nil, fmt.Errorf("ADD without a pinned netns %q", pod.NetNSPath)
	}
	f.inits = append(f.inits, processesInNetNS(pod.NetNSPath)...)
	if f.failAdd {
		return nil, fmt.Errorf("fake plugin refuses: %w", errdefs.ErrUnavailable)
	}
	return &cni.Result{IPs: []string{"10.88.0.5", "fd00::5"}}, nil
}

func (f *fakeNetwork) TearDownPod(ctx context.Context, pod cni.PodNetwork) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.dels[pod.SandboxID]++
	return nil
}

func (f *fakeNetwork) Status() error { return nil }

func (f *fakeNetwork) counts(id string) (adds, dels int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.adds[id], f.dels[id]
}

func (f *fakeNetwork) onlyID(t *testing.T) string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.adds) != 1 {
		t.Fatalf("want one sandbox networked, got %v", f.adds)
	}
	for id := range f.adds {
		return id
	}
	return ""
}

func processesInNetNS(pin string) []int {
	var want unix.Stat_t
	if unix.Stat(pin, &want) != nil {
		return nil
	}
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat("/proc/"+e.Name()+"/ns/net", &st) == nil && st.Ino == want.Ino && st.Dev == want.Dev {
			out = append(out, pid)
		}
	}
	return out
}

func TestSandboxRollbackOnNetworkFailure(t *testing.T) {
	net := newFakeNetwork()
	net.failAdd = true
	e := runtimetest.Start(t, runtimetest.WithNetwork(net))
	cfg := withNamespaces(runtimetest.PodConfig("fails"), runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD)
	cfg.Linux.Sysctls = map[string]string{"kernel.shmmni": "2048"}
	_, err := e.Runtime.RunPodSandbox(e.Ctx(), &runtimeapi.RunPodSandboxRequest{Config: cfg})
	wantCode(t, err, codes.Unavailable)

	id := net.onlyID(t)
	if adds, dels := net.counts(id); adds != 1 || dels != 1 {
		t.Errorf("ADD %d, DEL %d: a failed ADD must be followed by one DEL", adds, dels)
	}
	if len(net.inits) == 0 {
		t.Error("no catatonit was running during ADD; the rollback of the pod init went untested")
	}
	for _, pid := range net.inits {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			t.Errorf("pod init %d survived the rollback", pid)
		}
	}
	resp, err := e.Runtime.ListPodSandbox(e.Ctx(), &runtimeapi.ListPodSandboxRequest{})
	if err != nil || len(resp.Items) != 0 {
		t.Errorf("after a failed run, list = %v, %v", resp, err)
	}
	assertGone(t, e, sandboxInfo{
		NetNSPath:    filepath.Join(e.Config.State, "ns/net", id),
		IPCNSPath:    filepath.Join(e.Config.State, "ns/ipc", id),
		UTSNSPath:    filepath.Join(e.Config.State, "ns/uts", id),
		PIDNSPath:    filepath.Join(e.Config.State, "ns/pid", id),
		ShmPath:      filepath.Join(e.Config.State, "pods", id),
		SandboxDir:   filepath.Join(e.Config.Root, "pods", id),
		CgroupParent: e.Config.CgroupParent + "/" + id,
	})
	// The name is free again: the kubelet retries the same attempt.
	net.mu.Lock()
	net.failAdd = false
	net.mu.Unlock()
	e.RunPod(cfg, "")
}

func TestSandboxNetworkDelOncePerAdd(t *testing.T) {
	net := newFakeNetwork()
	e := runtimetest.Start(t, runtimetest.WithNetwork(net))
	id := e.RunPod(runtimetest.PodConfig("net"), "")
	st, _ := podStatus(t, e, id)
	if st.Network.GetIp() != "10.88.0.5" || len(st.Network.AdditionalIps) != 1 || st.Network.AdditionalIps[0].Ip != "fd00::5" {
		t.Errorf("network status = %v", st.Network)
	}
	for i := 0; i < 2; i++ {
		if _, err := e.Runtime.StopPodSandbox(e.Ctx(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Fatal(err)
		}
	}
	e.Restart()
	if _, err := e.Runtime.RemovePodSandbox(e.Ctx(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
	if adds, dels := net.counts(id); adds != 1 || dels != 1 {
		t.Errorf("stop, stop, restart, remove: ADD %d, DEL %d", adds, dels)
	}

	// Networked before a restart, torn down after it.
	id = e.RunPod(runtimetest.PodConfig("net2"), "")
	e.Restart()
	for i := 0; i < 2; i++ {
		if _, err := e.Runtime.StopPodSandbox(e.Ctx(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Fatal(err)
		}
	}
	if adds, dels := net.counts(id); adds != 1 || dels != 1 {
		t.Errorf("restart, stop, stop: ADD %d, DEL %d", adds, dels)
	}

	// Host network pods never reach the plugin.
	hid := e.RunPod(withNamespaces(runtimetest.PodConfig("hostnet"), runtimeapi.NamespaceMode_NODE, runtimeapi.NamespaceMode_CONTAINER, runtimeapi.NamespaceMode_NODE), "")
	if _, err := e.Runtime.RemovePodSandbox(e.Ctx(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: hid}); err != nil {
		t.Fatal(err)
	}
	if adds, dels := net.counts(hid); adds != 0 || dels != 0 {
		t.Errorf("host network pod: ADD %d, DEL %d", adds, dels)
	}
}

func readyState(t *testing.T, e *runtimetest.Env) map[string]runtimeapi.PodSandboxState {
	t.Helper()
	resp, err := e.Runtime.ListPodSandbox(e.Ctx(), &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]runtimeapi.PodSandboxState{}
	for _, p := range resp.Items {
		out[p.Id] = p.State
	}
	return out
}

func TestSandboxRestartRecovery(t *testing.T) {
	e := runtimetest.Start(t)
	shared := e.RunPod(withNamespaces(runtimetest.PodConfig("shared"), runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD), "")
	stopped := e.RunPod(runtimetest.PodConfig("stopped"), "crun")
	if _, err := e.Runtime.StopPodSandbox(e.Ctx(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: stopped}); err != nil {
		t.Fatal(err)
	}
	plainCfg := runtimetest.PodConfig("plain")
	plain := e.RunPod(plainCfg, "")
	before := readyState(t, e)
	_, sharedInfo := podStatus(t, e, shared)
	_, plainInfo := podStatus(t, e, plain)

	e.Restart()
	after := readyState(t, e)
	if len(after) != 3 || after[shared] != before[shared] || after[stopped] != runtimeapi.PodSandboxState_SANDBOX_NOTREADY || after[plain] != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Errorf("after restart: %v, before: %v", after, before)
	}
	if st, info := podStatus(t, e, shared); st.State != runtimeapi.PodSandboxState_SANDBOX_READY || info.PID != sharedInfo.PID {
		t.Errorf("shared-PID pod after restart: %v %+v", st.State, info)
	}
	if st, _ := podStatus(t, e, stopped); st.RuntimeHandler != "crun" {
		t.Errorf("handler after restart = %q", st.RuntimeHandler)
	}
	// Names stay reserved across a restart.
	_, err := e.Runtime.RunPodSandbox(e.Ctx(), &runtimeapi.RunPodSandboxRequest{Config: plainCfg})
	wantCode(t, err, codes.AlreadyExists)

	// The pod init dies while the daemon is down: the pod lost its PID namespace.
	e.Stop()
	if err := syscall.Kill(sharedInfo.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, sharedInfo.PID)
	// A RunPodSandbox cut short: its record still says creating.
	recPath := filepath.Join(e.Config.Root, "sandboxes", plain+".json")
	b, err := os.ReadFile(recPath)
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	rec["creating"] = true
	rec["state"] = 1
	// Cut short before catatonit's pid was recorded: recovery must find it by its namespaces.
	plainInit := 0
	if pid, ok := rec["infraPid"].(float64); ok {
		plainInit = int(pid)
	}
	delete(rec, "infraPid")
	delete(rec, "infraStartTime")
	b, _ = json.Marshal(rec)
	if err := os.WriteFile(recPath, b, 0o600); err != nil {
		t.Fatal(err)
	}

	e.Restart()
	after = readyState(t, e)
	if after[shared] != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("pod whose init died is %v, want NOTREADY", after[shared])
	}
	if _, ok := after[plain]; ok || len(after) != 2 {
		t.Errorf("half-made sandbox was not undone: %v", after)
	}
	for _, p := range []string{plainInfo.NetNSPath, plainInfo.ShmPath, plainInfo.SandboxDir} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("half-made sandbox left %s", p)
		}
	}
	if d := cgroupDirs(plainInfo.CgroupParent); len(d) > 0 {
		t.Errorf("half-made sandbox left cgroups %v", d)
	}
	if plainInit == 0 {
		t.Error("the half-made sandbox had no pod init; the search by namespace went untested")
	} else if b, err := os.ReadFile("/proc/" + strconv.Itoa(plainInit) + "/stat"); err == nil && !containsZombie(b) {
		t.Errorf("the half-made sandbox's catatonit %d survived recovery", plainInit)
	}
	e.RunPod(plainCfg, "") // its name was released
	for id := range after {
		if _, err := e.Runtime.RemovePodSandbox(e.Ctx(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSandboxConcurrentRunSameName(t *testing.T) {
	e := runtimetest.Start(t)
	cfg := runtimetest.PodConfig("race")
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = e.Runtime.RunPodSandbox(e.Ctx(), &runtimeapi.RunPodSandboxRequest{Config: cfg})
		}()
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch status.Code(err) {
		case codes.OK:
			ok++
		case codes.AlreadyExists:
		default:
			t.Errorf("unexpected error %v", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d concurrent runs of one pod succeeded, want 1", ok)
	}
}

func TestSandboxRollbackOnInitFailure(t *testing.T) {
	net := newFakeNetwork()
	e := runtimetest.Start(t, runtimetest.WithNetwork(net), runtimetest.WithConfig(func(c *engine.Config) {
		c.CatatonitPath = filepath.Join(c.Root, "no-such-catatonit")
	}))
	cfg := withNamespaces(runtimetest.PodConfig("noinit"), runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_POD)
	if _, err := e.Runtime.RunPodSandbox(e.Ctx(), &runtimeapi.RunPodSandboxRequest{Config: cfg}); err == nil {
		t.Fatal("RunPodSandbox without catatonit succeeded")
	}
	net.mu.Lock()
	adds := len(net.adds)
	net.mu.Unlock()
	if adds != 0 {
		t.Errorf("network was set up for a pod that failed before it")
	}
	assertGone(t, e, sandboxInfo{})
	if l, _ := os.ReadDir(filepath.Join(e.Config.Root, "pods")); len(l) > 0 {
		t.Errorf("pod dirs left: %v", l)
	}
	for _, kind := range []string{"net", "ipc", "uts", "pid"} {
		if l, _ := os.ReadDir(filepath.Join(e.Config.State, "ns", kind)); len(l) > 0 {
			t.Errorf("%s pins left: %v", kind, l)
		}
	}
	// Without a shared PID namespace the pod needs no init and runs.
	e.RunPod(withNamespaces(runtimetest.PodConfig("noinit2"), runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_CONTAINER, runtimeapi.NamespaceMode_POD), "")
}
