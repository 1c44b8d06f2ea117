package cni

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

// assertNoLeaks checks everything a pod's network leaves on the host: host-local's store, veths on
// the bridge, iptables rules naming the sandboxes, netns mounts, pending marks and cache entries.
func (tn *testNet) assertNoLeaks(t *testing.T, ids ...string) {
	t.Helper()
	if ips := tn.allocated(t); len(ips) > 0 {
		t.Errorf("IPs still allocated in host-local's store: %v", ips)
	}
	if v := tn.vethsOnBridge(t); len(v) > 0 {
		t.Errorf("veths still on bridge %s: %v", tn.Net.Bridge, v)
	}
	var needles []string
	for _, id := range ids {
		needles = append(needles, `id: "`+id+`"`)
	}
	if hits := iptablesMentioning(t, needles...); len(hits) > 0 {
		t.Errorf("iptables rules left behind:\n%s", strings.Join(hits, "\n"))
	}
	for _, sub := range []string{"pending", "cache/results"} {
		ents, _ := os.ReadDir(filepath.Join(tn.Dir, "state", sub))
		if len(ents) > 0 {
			t.Errorf("state/%s not empty: %d entries", sub, len(ents))
		}
	}
}

func cycles(t *testing.T) int {
	if s := os.Getenv("NODELET_CNI_CYCLES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("NODELET_CNI_CYCLES=%q: %v", s, err)
		}
		return n
	}
	return 50
}

// TestAddDelCyclesLeaveNothing runs ADD/DEL cycles with a hostPort each (portmap's rules are the
// easiest thing to leak). NODELET_CNI_CYCLES=500 runs the long version.
func TestAddDelCyclesLeaveNothing(t *testing.T) {
	tn := newTestNet(t)
	ctx := ctxT(t)
	n := cycles(t)
	var ids []string
	seen := map[string]bool{}
	// One port for every cycle: each cycle's mapping is gone before the next one's is made.
	hostPort := freePort(t)
	for i := range n {
		name := fmt.Sprintf("cycle-%d", i)
		p := PodNetwork{
			Namespace: "test", Name: name, UID: "uid-" + name,
			SandboxID: fmt.Sprintf("%xcycle%d", os.Getpid(), i),
			PortMappings: []*runtimeapi.PortMapping{
				{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: hostPort},
			},
		}
		p.NetNSPath = filepath.Join(tn.NSDir, name)
		if err := pinNetNS(p.NetNSPath); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, p.SandboxID)
		r, err := tn.Manager.SetUpPod(ctx, p)
		if err != nil {
			removeNetNS(t, p.NetNSPath)
			t.Fatalf("cycle %d: %v", i, err)
		}
		seen[r.IPs[0]] = true
		if err := tn.Manager.TearDownPod(ctx, p); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		removeNetNS(t, p.NetNSPath)
	}
	t.Logf("%d cycles, %d distinct IPs handed out", n, len(seen))
	if m := testutil.MountsUnder(tn.NSDir); len(m) > 0 {
		t.Errorf("netns mounts left behind: %v", m)
	}
	tn.assertNoLeaks(t, ids...)
}

// TestTearDownIsIdempotentAndReleasesOnce repeats DELs of a pod whose IP may meanwhile belong to
// another pod: the repeat must not free the other pod's IP.
func TestTearDownIsIdempotentAndReleasesOnce(t *testing.T) {
	tn := newTestNet(t)
	ctx := ctxT(t)
	a, b := tn.pod(t, "once-a"), tn.pod(t, "once-b")
	if _, err := tn.Manager.SetUpPod(ctx, a); err != nil {
		t.Fatal(err)
	}
	// A retried SetUpPod returns the same IPs without a second ADD.
	r1, _ := tn.Manager.SetUpPod(ctx, a)
	r2, err := tn.Manager.SetUpPod(ctx, a)
	if err != nil || !slices.Equal(r1.IPs, r2.IPs) || len(tn.allocated(t)) != 1 {
		t.Fatalf("repeated SetUpPod: %v %v, %v, allocated %v", r1, r2, err, tn.allocated(t))
	}
	for range 3 {
		if err := tn.Manager.TearDownPod(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	rb, err := tn.Manager.SetUpPod(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := tn.Manager.TearDownPod(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got := tn.allocated(t); !slices.Equal(got, rb.IPs) {
		t.Fatalf("after a stale DEL of a, allocated = %v, want b's %v", got, rb.IPs)
	}
	if err := tn.Manager.TearDownPod(ctx, b); err != nil {
		t.Fatal(err)
	}
	// A pod that never had a network tears down cleanly too.
	if err := tn.Manager.TearDownPod(ctx, PodNetwork{SandboxID: "never-set-up"}); err != nil {
		t.Fatal(err)
	}
	tn.assertNoLeaks(t, a.SandboxID, b.SandboxID)
}

// TestTearDownAfterRestartWithChangedConfig: the daemon restarts and meanwhile the admin replaced
// the network config; DEL still uses what the ADD used (libcni's cache) and frees everything.
func TestTearDownAfterRestartWithChangedConfig(t *testing.T) {
	tn := newTestNet(t)
	ctx := ctxT(t)
	p := tn.pod(t, "restart")
	p.PortMappings = []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: freePort(t)}}
	if _, err := tn.Manager.SetUpPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	tn.Manager.Close()

	confDir := filepath.Join(tn.Dir, "net.d")
	other := tn.Net
	other.Name += "-other"
	other.Bridge += "x"
	os.Remove(filepath.Join(confDir, defaultConfName))
	if err := os.WriteFile(filepath.Join(confDir, "05-other.conflist"), other.ConfList(), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{ConfDir: confDir, StateDir: filepath.Join(tn.Dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if f := m.ConfigFile(); filepath.Base(f) != "05-other.conflist" {
		t.Fatalf("restarted manager uses %q", f)
	}
	// The caller after a restart may not remember the port mappings; the cache does.
	if err := m.TearDownPod(ctx, PodNetwork{SandboxID: p.SandboxID, NetNSPath: p.NetNSPath}); err != nil {
		t.Fatal(err)
	}
	tn.assertNoLeaks(t, p.SandboxID)
}

// TestTearDownWhenNetNSIsGone: the namespace was removed before the DEL (its veth went with it).
func TestTearDownWhenNetNSIsGone(t *testing.T) {
	tn := newTestNet(t)
	ctx := ctxT(t)
	p := tn.pod(t, "gone")
	p.PortMappings = []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: freePort(t)}}
	if _, err := tn.Manager.SetUpPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	removeNetNS(t, p.NetNSPath)
	if err := tn.Manager.TearDownPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := tn.Manager.TearDownPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	tn.assertNoLeaks(t, p.SandboxID)
}

// failingExec fails one plugin's ADD after the plugins before it ran, like a portmap that cannot
// program iptables.
type failingExec struct {
	invoke.Exec
	plugin string
	fail   bool
}

func (f *failingExec) ExecPlugin(ctx context.Context, path string, stdin []byte, env []string) ([]byte, error) {
	if f.fail && filepath.Base(path) == f.plugin && slices.Contains(env, "CNI_COMMAND=ADD") {
		return nil, errors.New("injected failure")
	}
	return f.Exec.ExecPlugin(ctx, path, stdin, env)
}

func TestHalfFailedAddIsRolledBack(t *testing.T) {
	tn := newTestNet(t)
	ctx := ctxT(t)
	fe := &failingExec{Exec: &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}, PluginDecoder: version.PluginDecoder{}}, plugin: "portmap", fail: true}
	m, err := New(Options{ConfDir: filepath.Join(tn.Dir, "net.d"), StateDir: filepath.Join(tn.Dir, "state"), Exec: fe})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	p := tn.pod(t, "halfadd")
	p.PortMappings = []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: freePort(t)}}
	if _, err := m.SetUpPod(ctx, p); err == nil {
		t.Fatal("SetUpPod succeeded through a failing portmap")
	}
	tn.assertNoLeaks(t, p.SandboxID)
	// The pod's own TearDownPod afterwards is a harmless no-op; a new ADD works.
	if err := m.TearDownPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	fe.fail = false
	if _, err := m.SetUpPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := m.TearDownPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	tn.assertNoLeaks(t, p.SandboxID)
}

// TestInterruptedAddIsTornDown: the daemon died inside ADD (after bridge, before the cache was
// written); only the pending mark knows. TearDownPod must still free the IP.
func TestInterruptedAddIsTornDown(t *testing.T) {
	tn := newTestNet(t)
	ctx := ctxT(t)
	p := tn.pod(t, "crash")
	list, err := tn.Manager.network(ctx)
	if err != nil {
		t.Fatal(err)
	}
	caps, _ := capabilityArgs(p)
	rt := runtimeConfFor(p, DefaultIfName, caps)
	if err := tn.Manager.mark(list, rt); err != nil {
		t.Fatal(err)
	}
	// Run only the bridge plugin, as if the daemon died right after it.
	bridgeOnly := *list
	bridgeOnly.Plugins = list.Plugins[:1]
	if _, err := tn.Manager.cni.AddNetworkList(ctx, &bridgeOnly, rt); err != nil {
		t.Fatal(err)
	}
	tn.Manager.cni.GetCachedAttachments("") // keep the API honest: nothing else to do
	os.RemoveAll(filepath.Join(tn.Dir, "state", "cache"))
	if len(tn.allocated(t)) != 1 {
		t.Fatalf("allocated %v, want one IP", tn.allocated(t))
	}
	if err := tn.Manager.TearDownPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	tn.assertNoLeaks(t, p.SandboxID)
}

// TestTearDownAfterStateLoss: the state dir vanished (tmpfs after a reboot, or wiped) while the
// plugins' own state did not; the pod's own arguments are enough to free its IP and rules.
func TestTearDownAfterStateLoss(t *testing.T) {
	tn := newTestNet(t)
	ctx := ctxT(t)
	p := tn.pod(t, "lost")
	p.PortMappings = []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: freePort(t)}}
	if _, err := tn.Manager.SetUpPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	tn.Manager.Close()
	if err := os.RemoveAll(filepath.Join(tn.Dir, "state")); err != nil {
		t.Fatal(err)
	}
	m, err := New(Options{ConfDir: filepath.Join(tn.Dir, "net.d"), StateDir: filepath.Join(tn.Dir, "state")})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := m.TearDownPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	tn.assertNoLeaks(t, p.SandboxID)
}
