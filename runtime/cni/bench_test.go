package cni

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkSetUpPod measures CNI ADD (loopback up, bridge + host-local, portmap, bandwidth) and
// DEL on the default chain, each pod in a fresh namespace, without and with a hostPort (portmap
// only programs iptables for the latter). It prints the median and p90 of both, the figures
// RunPodSandbox and StopPodSandbox pay for networking.
//
//	go test -run '^$' -bench SetUpPod -benchtime 200x ./runtime/cni/
func BenchmarkSetUpPod(b *testing.B) {
	b.Run("plain", func(b *testing.B) { benchSetUpPod(b, false) })
	b.Run("hostPort", func(b *testing.B) { benchSetUpPod(b, true) })
}

func benchSetUpPod(b *testing.B, hostPort bool) {
	tn := newTestNet(b)
	ctx := ctxT(b)
	var add, del []time.Duration
	port := freePort(b)
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		name := fmt.Sprintf("bench-%d", i)
		p := PodNetwork{
			Namespace: "bench", Name: name, UID: "uid-" + name,
			SandboxID: fmt.Sprintf("%xbench%d", os.Getpid(), i),
			NetNSPath: filepath.Join(tn.NSDir, name),
		}
		if hostPort {
			p.PortMappings = []*runtimeapi.PortMapping{
				{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: port},
			}
		}
		if err := pinNetNS(p.NetNSPath); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		if _, err := tn.Manager.SetUpPod(ctx, p); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := tn.Manager.TearDownPod(ctx, p); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		b.StopTimer()
		add, del = append(add, t1.Sub(t0)), append(del, t2.Sub(t1))
		removeNetNS(b, p.NetNSPath)
		b.StartTimer()
	}
	b.StopTimer()
	report(b, "add", add)
	report(b, "del", del)
	if ips := tn.allocated(b); len(ips) > 0 {
		b.Errorf("IPs leaked: %v", ips)
	}
}

func report(b *testing.B, what string, d []time.Duration) {
	if len(d) == 0 {
		return
	}
	slices.Sort(d)
	p50, p90 := d[len(d)/2], d[len(d)*9/10]
	b.ReportMetric(float64(p50.Microseconds())/1000, what+"-p50-ms")
	b.ReportMetric(float64(p90.Microseconds())/1000, what+"-p90-ms")
	b.Logf("%s: n=%d median %v p90 %v max %v", what, len(d), p50, p90, d[len(d)-1])
}
