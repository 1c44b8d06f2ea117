package cni

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/runtime/internal/lockedthread"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// newNetNS pins a fresh network namespace at dir/name, the way `ip netns add` does (a bind mount of
// the namespace file onto an empty file), and removes it when the test ends.
func newNetNS(t testing.TB, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := pinNetNS(p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeNetNS(t, p) })
	return p
}

func pinNetNS(p string) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	f.Close()
	// The thread ends with the call, taking the new namespace with it.
	return lockedthread.Run(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return fmt.Errorf("unshare netns: %w", err)
		}
		src := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		if err := unix.Mount(src, p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("pin netns at %s: %w", p, err)
		}
		return nil
	})
}

func removeNetNS(t testing.TB, p string) {
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
		t.Errorf("unmount netns %s: %v", p, err)
	}
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		t.Errorf("remove netns file %s: %v", p, err)
	}
}

var netSeq atomic.Uint32

// testNet is a private CNI network: its own bridge, /24 in 10.250.0.0/16 and host-local store, so
// tests never touch the default network or each other.
type testNet struct {
	Manager *Manager
	Net     DefaultNetwork
	Dir     string // root of the test's files
	NSDir   string
}

func newTestNet(t testing.TB) *testNet {
	t.Helper()
	return newTestNetWith(t, nil)
}

// newTestNetWith lets a test change the network before the manager writes it.
func newTestNetWith(t testing.TB, mutate func(*DefaultNetwork)) *testNet {
	t.Helper()
	testutil.Require(t, "ip", "iptables", "iptables-save", "nsenter", "busybox",
		"cni:bridge", "cni:host-local", "cni:portmap", "cni:bandwidth")
	dir := t.TempDir()
	n := netSeq.Add(1)
	id := (uint32(os.Getpid())*7 + n*13) % 250
	d := DefaultNetwork{
		Name:    fmt.Sprintf("nodelet-test-%d-%d", os.Getpid(), n),
		Bridge:  fmt.Sprintf("nlt%d", 10000+id*37%90000),
		Subnet:  fmt.Sprintf("10.250.%d.0/24", id),
		DataDir: filepath.Join(dir, "ipam"),
	}
	if mutate != nil {
		mutate(&d)
	}
	tn := &testNet{Net: d, Dir: dir, NSDir: filepath.Join(dir, "netns")}
	if err := os.MkdirAll(tn.NSDir, 0o755); err != nil {
		t.Fatal(err)
	}
	before := iptablesChains(t)
	t.Cleanup(func() { cleanupHostSide(t, d, before) })
	m, err := New(Options{
		ConfDir:  filepath.Join(dir, "net.d"),
		StateDir: filepath.Join(dir, "state"),
		Default:  d,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if err := m.Status(); err != nil {
		t.Fatalf("status of a fresh test network: %v", err)
	}
	tn.Manager = m
	return tn
}

func (tn *testNet) pod(t testing.TB, name string) PodNetwork {
	t.Helper()
	id := fmt.Sprintf("%x%s", os.Getpid(), strings.ReplaceAll(name, "-", ""))
	return PodNetwork{
		Namespace: "test", Name: name, UID: "uid-" + name, SandboxID: id,
		NetNSPath: newNetNS(t, tn.NSDir, name),
	}
}

// allocated lists the IPs host-local holds for this network (one file per IP in its store).
func (tn *testNet) allocated(t testing.TB) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(tn.Net.DataDir, tn.Net.Name))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "last_reserved_ip") || e.Name() == "lock" {
			continue
		}
		ips = append(ips, e.Name())
	}
	return ips
}

// vethsOnBridge lists the host-side veths enslaved to the test bridge.
func (tn *testNet) vethsOnBridge(t testing.TB) []string {
	t.Helper()
	out, err := exec.Command("ip", "-o", "link", "show", "master", tn.Net.Bridge).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "does not exist") {
			return nil
		}
		t.Fatalf("ip link show master %s: %v: %s", tn.Net.Bridge, err, out)
	}
	var links []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			links = append(links, strings.TrimSuffix(f[1], ":"))
		}
	}
	return links
}

// iptablesMentioning returns the iptables-save lines that name any of the given strings.
func iptablesMentioning(t testing.TB, needles ...string) []string {
	t.Helper()
	out, err := exec.Command("iptables-save").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables-save: %v: %s", err, out)
	}
	var hits []string
	for _, l := range strings.Split(string(out), "\n") {
		for _, n := range needles {
			if strings.Contains(l, n) {
				hits = append(hits, l)
				break
			}
		}
	}
	return hits
}

type chainKey struct{ table, chain string }

func iptablesChains(t testing.TB) map[chainKey]bool {
	t.Helper()
	out, err := exec.Command("iptables-save").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables-save: %v: %s", err, out)
	}
	chains := map[chainKey]bool{}
	table := ""
	for _, l := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(l, "*"):
			table = l[1:]
		case strings.HasPrefix(l, ":"):
			chains[chainKey{table, strings.Fields(l[1:])[0]}] = true
		}
	}
	return chains
}

// cleanupHostSide removes the test bridge and the iptables chains the test left. It never touches
// what other users of CNI on this host may rely on: a per-pod chain goes only when the rule
// jumping to it carries this test's network name, and portmap's shared CNI-HOSTPORT-* chains
// only when they are new and no pod anywhere still has a hostPort rule in them.
func cleanupHostSide(t testing.TB, d DefaultNetwork, before map[chainKey]bool) {
	if out, err := exec.Command("ip", "link", "del", d.Bridge).CombinedOutput(); err != nil &&
		!strings.Contains(string(out), "Cannot find device") {
		t.Errorf("delete bridge %s: %v: %s", d.Bridge, err, out)
	}
	dump, err := exec.Command("iptables-save").Output()
	if err != nil {
		t.Errorf("iptables-save: %v", err)
		return
	}
	mine := fmt.Sprintf("name: \\\"%s\\\"", d.Name)
	ipt := func(table string, args ...string) error {
		return exec.Command("iptables", append([]string{"-w", "-t", table}, args...)...).Run()
	}
	table := ""
	var podChains []chainKey
	for _, l := range strings.Split(string(dump), "\n") {
		if strings.HasPrefix(l, "*") {
			table = l[1:]
			continue
		}
		f := strings.Fields(l)
		if len(f) < 2 || f[0] != "-A" || !strings.Contains(l, mine) {
			continue
		}
		// A rule of this test's network: delete it; remember the per-pod chain it jumps to.
		if err := ipt(table, append([]string{"-D"}, unquoteRule(l[3:])...)...); err != nil {
			t.Errorf("delete leftover rule %q: %v", l, err)
		}
		if k := slices.Index(f, "-j"); k > 0 && k+1 < len(f) && strings.HasPrefix(f[k+1], "CNI-") &&
			!strings.HasPrefix(f[k+1], "CNI-HOSTPORT-") {
			podChains = append(podChains, chainKey{table, f[k+1]})
		}
	}
	for _, k := range podChains {
		ipt(k.table, "-F", k.chain)
		ipt(k.table, "-X", k.chain)
	}
	after := iptablesChains(t)
	dump, err = exec.Command("iptables-save").Output()
	if err != nil {
		t.Errorf("iptables-save: %v", err)
		return
	}
	// Shared chains of portmap and firewall, each with the sign that some pod still uses it.
	groups := []struct {
		chains []chainKey
		inUse  string
	}{
		{[]chainKey{{"nat", "CNI-HOSTPORT-DNAT"}, {"nat", "CNI-HOSTPORT-SNAT"},
			{"nat", "CNI-HOSTPORT-MASQ"}, {"nat", "CNI-HOSTPORT-SETMARK"}}, "-j CNI-DN-"},
		{[]chainKey{{"filter", "CNI-FORWARD"}, {"filter", "CNI-ADMIN"}}, "-A CNI-FORWARD -d "},
	}
	for _, g := range groups {
		if strings.Contains(string(dump), g.inUse) {
			continue // someone's pods still rely on these
		}
		var fresh []chainKey
		for _, k := range g.chains {
			if !before[k] && after[k] {
				fresh = append(fresh, k)
			}
		}
		// Unhook every rule that jumps to a fresh chain, then flush and delete the chains.
		table := ""
		for _, l := range strings.Split(string(dump), "\n") {
			if strings.HasPrefix(l, "*") {
				table = l[1:]
				continue
			}
			f := strings.Fields(l)
			if len(f) < 2 || f[0] != "-A" {
				continue
			}
			for _, k := range fresh {
				if k.table == table && strings.HasSuffix(l, " -j "+k.chain) {
					ipt(table, append([]string{"-D"}, unquoteRule(l[3:])...)...)
				}
			}
		}
		for _, k := range fresh {
			ipt(k.table, "-F", k.chain)
		}
		for _, k := range fresh {
			if out, err := exec.Command("iptables", "-w", "-t", k.table, "-X", k.chain).CombinedOutput(); err != nil {
				t.Errorf("delete chain %s/%s: %v: %s", k.table, k.chain, err, out)
			}
		}
	}
}

// unquoteRule splits an iptables-save rule into arguments, honouring its double quotes.
func unquoteRule(rule string) []string {
	var args []string
	var cur strings.Builder
	inQuote, escaped, have := false, false, false
	for _, r := range rule {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case r == '\\':
			escaped = true
		case r == '"':
			inQuote = !inQuote
			have = true
		case r == ' ' && !inQuote:
			if have || cur.Len() > 0 {
				args = append(args, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
		}
	}
	if have || cur.Len() > 0 {
		args = append(args, cur.String())
	}
	return args
}

func ctxT(t testing.TB) context.Context {
	return context.Background()
}
