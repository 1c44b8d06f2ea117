package cni_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/cni"
	"github.com/nodelet/nodelet/test/harness/runtimetest"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// These tests run the real runtime server with the CNI manager as its network plugin, as the
// daemon does: RunPodSandbox does CNI ADD, StopPodSandbox CNI DEL.

func podIP(t testing.TB, e *runtimetest.Env, id string) string {
	t.Helper()
	st, err := e.Runtime.PodSandboxStatus(e.Ctx(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id})
	if err != nil {
		t.Fatal(err)
	}
	ip := st.GetStatus().GetNetwork().GetIp()
	if net.ParseIP(ip) == nil {
		t.Fatalf("sandbox %s has no pod IP in its status: %v", id, st.GetStatus().GetNetwork())
	}
	return ip
}

func removePod(t testing.TB, e *runtimetest.Env, id string) {
	t.Helper()
	if _, err := e.Runtime.StopPodSandbox(e.Ctx(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Runtime.RemovePodSandbox(e.Ctx(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		t.Fatal(err)
	}
}

func assertNoLeaks(t testing.TB, tn *cni.TestNet, ids []string) {
	t.Helper()
	if ips := tn.Allocated(t); len(ips) > 0 {
		t.Errorf("IPs still allocated: %v", ips)
	}
	if v := tn.VethsOnBridge(t); len(v) > 0 {
		t.Errorf("veths still on the bridge: %v", v)
	}
	var needles []string
	for _, id := range ids {
		needles = append(needles, `id: "`+id+`"`)
	}
	if hits := cni.IptablesMentioning(t, needles...); len(hits) > 0 {
		t.Errorf("iptables rules left behind:\n%s", strings.Join(hits, "\n"))
	}
}

// freePort is a hostPort outside the kernel's ephemeral range (see testutil.FreePort): a
// mapping's DNAT would take the connections of any other test that listened on it.
func freePort(t testing.TB) int32 {
	t.Helper()
	return int32(testutil.FreePort(t))
}

// TestPodsPingEachOtherAndServeAHostPort: two pods on the default-shaped bridge network; one pings
// and fetches from the other; the host reaches the second through its hostPort.
func TestPodsPingEachOtherAndServeAHostPort(t *testing.T) {
	tn := cni.NewTestNet(t)
	e := runtimetest.Start(t, runtimetest.WithNetwork(tn.Manager))

	client := runtimetest.PodConfig("client")
	clientID := e.RunPod(client, "")
	e.RunContainer(clientID, client, runtimetest.ContainerConfig("sh", "sleep", "1000"))

	hostPort := freePort(t)
	web := runtimetest.PodConfig("web")
	web.PortMappings = []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 8080, HostPort: hostPort}}
	webID := e.RunPod(web, "")
	e.RunContainer(webID, web, runtimetest.ContainerConfig("httpd", "sh", "-c",
		"mkdir -p /tmp/www && echo hello-from-web > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"))
	webIP := podIP(t, e, webID)
	if podIP(t, e, clientID) == webIP {
		t.Fatal("two pods share an IP")
	}

	execIn := func(podCtr string, cmd ...string) (string, int32) {
		resp, err := e.Runtime.ExecSync(e.Ctx(), &runtimeapi.ExecSyncRequest{ContainerId: podCtr, Cmd: cmd, Timeout: 30})
		if err != nil {
			t.Fatal(err)
		}
		return string(resp.Stdout) + string(resp.Stderr), resp.ExitCode
	}
	ctrs, err := e.Runtime.ListContainers(e.Ctx(), &runtimeapi.ListContainersRequest{
		Filter: &runtimeapi.ContainerFilter{PodSandboxId: clientID}})
	if err != nil || len(ctrs.Containers) != 1 {
		t.Fatalf("containers of the client pod: %v %v", ctrs, err)
	}
	clientCtr := ctrs.Containers[0].Id
	if out, code := execIn(clientCtr, "ping", "-c", "1", "-W", "5", webIP); code != 0 {
		t.Fatalf("ping from pod to pod: %d: %s", code, out)
	}
	var out string
	deadline := time.Now().Add(time.Minute)
	for {
		var code int32
		out, code = execIn(clientCtr, "wget", "-q", "-O", "-", "http://"+webIP+":8080/index.html")
		if code == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out != "hello-from-web\n" {
		t.Fatalf("pod to pod HTTP: %q", out)
	}

	hc := &http.Client{Timeout: 30 * time.Second}
	for _, host := range []string{"127.0.0.1", hostAddr(t)} {
		r, err := hc.Get(fmt.Sprintf("http://%s:%d/index.html", host, hostPort))
		if err != nil {
			t.Fatalf("hostPort from the host via %s: %v", host, err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if string(b) != "hello-from-web\n" {
			t.Fatalf("hostPort via %s answered %q", host, b)
		}
	}

	removePod(t, e, clientID)
	removePod(t, e, webID)
	assertNoLeaks(t, tn, []string{clientID, webID})
}

func hostAddr(t testing.TB) string {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !strings.HasPrefix(n.IP.String(), "10.250.") {
			return n.IP.String()
		}
	}
	t.Fatal("no non-loopback IPv4 address")
	return ""
}

func sandboxCycles(t testing.TB) int {
	if s := os.Getenv("NODELET_SANDBOX_CYCLES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return 30
}

// TestSandboxCyclesLeaveNothing creates and removes sandboxes with a hostPort each; nothing of
// their networks may remain (mounts and processes are checked by runtimetest at cleanup).
// NODELET_SANDBOX_CYCLES=500 runs the long version.
func TestSandboxCyclesLeaveNothing(t *testing.T) {
	tn := cni.NewTestNet(t)
	e := runtimetest.Start(t, runtimetest.WithNetwork(tn.Manager))
	n := sandboxCycles(t)
	var ids []string
	// One port for every cycle: each cycle's mapping is gone before the next one's is made.
	hostPort := freePort(t)
	for i := range n {
		cfg := runtimetest.PodConfig(fmt.Sprintf("cycle-%d", i))
		cfg.PortMappings = []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: hostPort}}
		id := e.RunPod(cfg, "")
		ids = append(ids, id)
		podIP(t, e, id)
		removePod(t, e, id)
	}
	assertNoLeaks(t, tn, ids)
}

// BenchmarkRunPodSandboxWithNetwork prints RunPodSandbox's latency with CNI (bridge, host-local,
// portmap, bandwidth; no hostPort) and that of StopPodSandbox+RemovePodSandbox, median and p90.
//
//	go test -run '^$' -bench RunPodSandboxWithNetwork -benchtime 100x ./runtime/cni/
func BenchmarkRunPodSandboxWithNetwork(b *testing.B) {
	tn := cni.NewTestNet(b)
	e := runtimetest.Start(b, runtimetest.WithNetwork(tn.Manager))
	var run, rm []time.Duration
	for i := 0; b.Loop(); i++ {
		cfg := runtimetest.PodConfig(fmt.Sprintf("bench-%d", i))
		t0 := time.Now()
		id := e.RunPod(cfg, "")
		t1 := time.Now()
		removePod(b, e, id)
		run, rm = append(run, t1.Sub(t0)), append(rm, time.Since(t1))
	}
	b.StopTimer()
	report(b, "runp", run)
	report(b, "stopp+rmp", rm)
}

func report(b *testing.B, what string, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	p50, p90 := d[len(d)/2], d[len(d)*9/10]
	b.ReportMetric(float64(p50.Microseconds())/1000, what+"-p50-ms")
	b.ReportMetric(float64(p90.Microseconds())/1000, what+"-p90-ms")
	b.Logf("%s: n=%d median %v p90 %v", what, len(d), p50, p90)
}

// TestNetworkReadyCondition: the runtime's Status says NetworkReady=false with the manager's
// reason while the conf dir has no usable config, and true once one appears.
func TestNetworkReadyCondition(t *testing.T) {
	dir := t.TempDir()
	m, err := cni.New(cni.Options{ConfDir: dir + "/net.d", StateDir: dir + "/state", NoDefault: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e := runtimetest.Start(t, runtimetest.WithNetwork(m))
	netReady := func() *runtimeapi.RuntimeCondition {
		st, err := e.Runtime.Status(e.Ctx(), &runtimeapi.StatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range st.GetStatus().GetConditions() {
			if c.Type == runtimeapi.NetworkReady {
				return c
			}
		}
		t.Fatal("no NetworkReady condition")
		return nil
	}
	if c := netReady(); c.Status || !strings.Contains(c.Message, "no CNI network config in "+dir+"/net.d") {
		t.Fatalf("NetworkReady = %v", c)
	}
	conf := cni.DefaultNetwork{Name: "ready-test", Bridge: "nltready0", Subnet: "10.250.253.0/24", DataDir: dir + "/ipam"}
	if err := os.WriteFile(dir+"/net.d/10-ready.conflist", conf.ConfList(), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for !netReady().Status {
		if time.Now().After(deadline) {
			t.Fatalf("NetworkReady never became true: %v", netReady())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
