package cni

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

func ping(t *testing.T, nsPath, ip string) {
	t.Helper()
	out, err := exec.Command("nsenter", "--net="+nsPath, "busybox", "ping", "-c", "1", "-W", "5", ip).CombinedOutput()
	if err != nil {
		t.Fatalf("ping %s from %s: %v: %s", ip, nsPath, err, out)
	}
}

func TestTwoPodsPingEachOtherAndTheHost(t *testing.T) {
	tn := newTestNet(t)
	ctx := ctxT(t)
	a, b := tn.pod(t, "ping-a"), tn.pod(t, "ping-b")
	ra, err := tn.Manager.SetUpPod(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tn.Manager.TearDownPod(ctx, a) })
	rb, err := tn.Manager.SetUpPod(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tn.Manager.TearDownPod(ctx, b) })
	if len(ra.IPs) != 1 || len(rb.IPs) != 1 || ra.IPs[0] == rb.IPs[0] {
		t.Fatalf("IPs: a=%v b=%v", ra.IPs, rb.IPs)
	}
	_, subnet, _ := net.ParseCIDR(tn.Net.Subnet)
	for _, ip := range []string{ra.IPs[0], rb.IPs[0]} {
		if !subnet.Contains(net.ParseIP(ip)) {
			t.Errorf("pod IP %s outside the network's subnet %s", ip, subnet)
		}
	}
	ping(t, a.NetNSPath, rb.IPs[0])
	ping(t, b.NetNSPath, ra.IPs[0])
	ping(t, a.NetNSPath, "127.0.0.1") // loopback is up
	gw := subnet.IP.To4()
	gw[3]++
	ping(t, a.NetNSPath, gw.String()) // the host, through the bridge
}

// listenInPod opens a TCP and a UDP socket inside the pod's namespace; sockets stay in the
// namespace they were made in, so they are served from ordinary goroutines afterwards.
func listenInPod(t *testing.T, nsPath string, port int) {
	t.Helper()
	var ln net.Listener
	var pc net.PacketConn
	err := InNetNS(nsPath, func() error {
		var err error
		if ln, err = net.Listen("tcp4", fmt.Sprintf(":%d", port)); err != nil {
			return err
		}
		pc, err = net.ListenPacket("udp4", fmt.Sprintf(":%d", port))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); pc.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintf(c, "tcp hello from %s\n", c.LocalAddr())
			c.Close()
		}
	}()
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo(append([]byte("udp echo "), buf[:n]...), from)
		}
	}()
}

// freePort is a port for a hostPort mapping, which carries TCP and UDP: below the kernel's
// ephemeral range, so no listen(":0") or outgoing connection of another test can hold it and
// have its connections taken by the mapping's DNAT.
func freePort(t testing.TB) int32 {
	t.Helper()
	return int32(testutil.FreePort(t))
}

// hostIPv4 is an address of the machine other than loopback, to reach a hostPort the way another
// node would address it.
func hostIPv4(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() &&
			!strings.HasPrefix(n.IP.String(), "10.250.") {
			return n.IP.String()
		}
	}
	t.Fatal("no non-loopback IPv4 address on this host")
	return ""
}

func TestHostPortAnswersFromTheHost(t *testing.T) {
	tn := newTestNet(t)
	ctx := ctxT(t)
	p := tn.pod(t, "hostport")
	hostPort := freePort(t)
	p.PortMappings = []*runtimeapi.PortMapping{
		{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 8080, HostPort: hostPort},
		{Protocol: runtimeapi.Protocol_UDP, ContainerPort: 8080, HostPort: hostPort},
		{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 9090}, // no hostPort: no rule
	}
	listenInPod(t, p.NetNSPath, 8080)
	r, err := tn.Manager.SetUpPod(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tn.Manager.TearDownPod(ctx, p) })

	for _, host := range []string{hostIPv4(t), "127.0.0.1"} {
		addr := net.JoinHostPort(host, fmt.Sprint(hostPort))
		c, err := net.DialTimeout("tcp4", addr, 10*time.Second)
		if err != nil {
			t.Fatalf("dial hostPort %s: %v", addr, err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		if err != nil || !strings.Contains(line, r.IPs[0]+":8080") {
			t.Fatalf("tcp %s answered %q, %v; want the pod %s:8080", addr, line, err, r.IPs[0])
		}

		u, err := net.Dial("udp4", addr)
		if err != nil {
			t.Fatal(err)
		}
		u.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := u.Write([]byte("ping")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64)
		n, err := u.Read(buf)
		u.Close()
		if err != nil || string(buf[:n]) != "udp echo ping" {
			t.Fatalf("udp %s answered %q, %v", addr, buf[:n], err)
		}
	}

	if err := tn.Manager.TearDownPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	if hits := iptablesMentioning(t, `id: "`+p.SandboxID+`"`); len(hits) > 0 {
		t.Errorf("iptables rules left after teardown:\n%s", strings.Join(hits, "\n"))
	}
}
