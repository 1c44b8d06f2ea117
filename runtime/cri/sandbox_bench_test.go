package cri_test

import (
	"slices"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// BenchmarkSandboxLifecycle times RunPodSandbox, StopPodSandbox and RemovePodSandbox over CRI (no
// CNI: the network plugin is nil), for a pod with per-container PID namespaces and for one that
// shares a PID namespace (catatonit), and reports the median and p90 of each in milliseconds.
func BenchmarkSandboxLifecycle(b *testing.B) {
	for _, bc := range []struct {
		name string
		pid  runtimeapi.NamespaceMode
	}{{"pid=container", runtimeapi.NamespaceMode_CONTAINER}, {"pid=pod", runtimeapi.NamespaceMode_POD}} {
		b.Run(bc.name, func(b *testing.B) {
			e := runtimetest.Start(b)
			var run, stop, rm []time.Duration
			for i := 0; b.Loop(); i++ {
				cfg := runtimetest.PodConfig("bench")
				cfg.Linux.SecurityContext = &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{Pid: bc.pid}}
				t0 := time.Now()
				id := e.RunPod(cfg, "")
				t1 := time.Now()
				if _, err := e.Runtime.StopPodSandbox(e.Ctx(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				if _, err := e.Runtime.RemovePodSandbox(e.Ctx(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
					b.Fatal(err)
				}
				run, stop, rm = append(run, t1.Sub(t0)), append(stop, t2.Sub(t1)), append(rm, time.Since(t2))
			}
			for _, m := range []struct {
				name string
				d    []time.Duration
			}{{"run", run}, {"stop", stop}, {"remove", rm}} {
				slices.Sort(m.d)
				b.ReportMetric(ms(m.d[len(m.d)/2]), m.name+"-p50-ms")
				b.ReportMetric(ms(m.d[len(m.d)*9/10]), m.name+"-p90-ms")
			}
		})
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
