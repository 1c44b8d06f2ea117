package cni

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
)

// TestDualStackPodGetsBothFamilies: with an IPv6 range configured the pod gets an address of each
// family, IPv4 first (CRI takes the first as the pod IP), and both are released.
func TestDualStackPodGetsBothFamilies(t *testing.T) {
	tn := newTestNetWith(t, func(d *DefaultNetwork) {
		third := strings.Split(d.Subnet, ".")[2] // the test's own /24, so the /64 is its own too
		d.Subnet6 = fmt.Sprintf("fd00:250:%s::/64", third)
	})
	ctx := ctxT(t)
	a, b := tn.pod(t, "ds-a"), tn.pod(t, "ds-b")
	ra, err := tn.Manager.SetUpPod(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := tn.Manager.SetUpPod(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*Result{ra, rb} {
		if len(r.IPs) != 2 || net.ParseIP(r.IPs[0]).To4() == nil || net.ParseIP(r.IPs[1]).To4() != nil {
			t.Fatalf("IPs %v, want IPv4 then IPv6", r.IPs)
		}
	}
	// IPv6 duplicate address detection may hold the address back for a moment; ping retries.
	out, err := exec.Command("nsenter", "--net="+a.NetNSPath, "busybox", "sh", "-c",
		fmt.Sprintf("for i in $(seq 50); do busybox ping -6 -c 1 -W 1 %s && exit 0; sleep 0.2; done; exit 1", rb.IPs[1])).CombinedOutput()
	if err != nil {
		t.Fatalf("ping6 between pods: %v: %s", err, out)
	}
	for _, p := range []PodNetwork{a, b} {
		if err := tn.Manager.TearDownPod(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if ips := tn.allocated(t); len(ips) > 0 {
		t.Fatalf("allocated after teardown: %v", ips)
	}
	out6, _ := exec.Command("ip6tables-save").CombinedOutput()
	for _, id := range []string{a.SandboxID, b.SandboxID} {
		if strings.Contains(string(out6), id) {
			t.Errorf("ip6tables still mentions %s", id)
		}
	}
}
