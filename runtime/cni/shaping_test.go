package cni

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// TestBandwidthAnnotationsShapeTraffic: the annotations reach the bandwidth plugin, which puts a
// token bucket on the host side of the pod's veth (ingress) and on an ifb device (egress).
func TestBandwidthAnnotationsShapeTraffic(t *testing.T) {
	requireTC(t)
	tn := newTestNet(t)
	ctx := ctxT(t)
	p := tn.pod(t, "shaped")
	p.Annotations = map[string]string{IngressBandwidthAnnotation: "1M", EgressBandwidthAnnotation: "2M"}
	if _, err := tn.Manager.SetUpPod(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tn.Manager.TearDownPod(ctx, p) })
	veths := tn.vethsOnBridge(t)
	if len(veths) != 1 {
		t.Fatalf("veths on bridge: %v", veths)
	}
	out, err := exec.Command("tc", "qdisc", "show", "dev", strings.Split(veths[0], "@")[0]).CombinedOutput()
	if err != nil {
		t.Fatalf("tc: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "tbf") || !strings.Contains(string(out), "rate 1Mbit") {
		t.Fatalf("no 1Mbit token bucket on the pod's veth:\n%s", out)
	}
}

func requireTC(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("tc"); err != nil {
		t.Fatal("missing tc: install with `apt-get install -y iproute2`")
	}
}

// TestConcurrentPods sets up and tears down pods in parallel: plugins lock their own state, the
// manager serialises only per sandbox.
func TestConcurrentPods(t *testing.T) {
	tn := newTestNet(t)
	ctx := ctxT(t)
	const n = 12
	pods := make([]PodNetwork, n)
	for i := range pods {
		pods[i] = tn.pod(t, fmt.Sprintf("par-%d", i))
	}
	ips := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i, p := range pods {
		wg.Go(func() {
			r, err := tn.Manager.SetUpPod(ctx, p)
			if err != nil {
				errs <- err
				return
			}
			ips[i] = r.IPs[0]
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	seen := map[string]bool{}
	for _, ip := range ips {
		if seen[ip] {
			t.Errorf("IP %s handed out twice: %v", ip, ips)
		}
		seen[ip] = true
	}
	ping(t, pods[0].NetNSPath, ips[n-1])
	errs = make(chan error, 2*n)
	for _, p := range pods {
		wg.Go(func() {
			if err := tn.Manager.TearDownPod(ctx, p); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var ids []string
	for _, p := range pods {
		ids = append(ids, p.SandboxID)
	}
	tn.assertNoLeaks(t, ids...)
}
