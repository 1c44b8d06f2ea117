package cni

import (
	"os/exec"
	"testing"
)

func TestTwoPodsPing(t *testing.T) {
	tn := newTestNet(t)
	ctx := ctxT(t)
	a, b := tn.pod(t, "ping-a"), tn.pod(t, "ping-b")
	ra, err := tn.Manager.SetUpPod(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Manager.TearDownPod(ctx, a)
	rb, err := tn.Manager.SetUpPod(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Manager.TearDownPod(ctx, b)
	t.Logf("a=%v b=%v", ra.IPs, rb.IPs)
	out, _ := exec.Command("iptables-save").CombinedOutput()
	t.Logf("%s", out)
	out, err = exec.Command("nsenter", "--net="+a.NetNSPath, "busybox", "ping", "-c", "1", "-W", "5", rb.IPs[0]).CombinedOutput()
	if err != nil {
		t.Fatalf("ping %s from a: %v: %s", rb.IPs[0], err, out)
	}
}
