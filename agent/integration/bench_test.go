package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkPodStartup prints, for each runtime, how long a static pod takes from its manifest being
// written to its container running (image present), over 20 pods one after another, and when the
// agent's own status first says Running; then how long 30 and 100 manifests written at once take
// to all run, and to be all gone once their files are removed (grace period 2s).
// Run: go test -run '^$' -bench PodStartup -benchtime 1x ./agent/integration/
func BenchmarkPodStartup(b *testing.B) {
	for _, rt := range []struct {
		name  string
		start func(t testing.TB, dir, reg string) *criRuntime
	}{
		{"containerd", onContainerd},
		{"nodelet", onNodelet},
	} {
		b.Run(rt.name, func(b *testing.B) {
			e := newEnv(b, rt.start)
			e.startAgent()
			img := e.reg + "/busybox:1"
			// Warm up: the image is pulled once, then the pod goes.
			e.writePod("warm", "Always", img, loop)
			e.eventually("warm-up pod running", func() bool { return len(running(e.containers("warm"))) == 1 })
			os.Remove(filepath.Join(e.manifests, "warm.yaml"))
			e.eventually("warm-up pod gone", func() bool { return len(e.sandboxes("warm")) == 0 })

			const n = 20
			var toRunning, toStatus []time.Duration
			for i := 0; i < n; i++ {
				name := fmt.Sprintf("p%02d", i)
				start := time.Now()
				e.writePod(name, "Always", img, loop)
				var ran, known time.Duration
				for ran == 0 || known == 0 {
					if ran == 0 && len(running(e.containers(name))) == 1 {
						ran = time.Since(start)
					}
					if known == 0 && e.statusRunning(name) {
						known = time.Since(start)
					}
					if time.Since(start) > 90*time.Second {
						b.Fatalf("pod %s not running", name)
					}
					time.Sleep(time.Millisecond)
				}
				toRunning = append(toRunning, ran)
				toStatus = append(toStatus, known)
			}
			b.ReportMetric(ms(percentile(toRunning, 50)), "start-median-ms")
			b.ReportMetric(ms(percentile(toRunning, 90)), "start-p90-ms")
			b.ReportMetric(ms(percentile(toStatus, 50)), "status-median-ms")
			b.ReportMetric(ms(percentile(toStatus, 90)), "status-p90-ms")
			for i := 0; i < n; i++ {
				os.Remove(filepath.Join(e.manifests, fmt.Sprintf("p%02d.yaml", i)))
			}
			e.eventually("pods removed", func() bool { return e.countRunning() == 0 })

			for _, burst := range []int{30, 100} {
				start := time.Now()
				for i := 0; i < burst; i++ {
					e.writePod(fmt.Sprintf("b%03d", i), "Always", img, loop)
				}
				e.eventually("burst running", func() bool { return e.countRunning() == burst })
				b.ReportMetric(ms(time.Since(start)), fmt.Sprintf("burst%d-all-running-ms", burst))
				for i := 0; i < burst; i++ {
					os.Remove(filepath.Join(e.manifests, fmt.Sprintf("b%03d.yaml", i)))
				}
				start = time.Now()
				e.eventually("burst removed", func() bool { return len(e.allSandboxes()) == 0 })
				b.ReportMetric(ms(time.Since(start)), fmt.Sprintf("burst%d-all-removed-ms", burst))
			}
		})
	}
}

func (e *env) statusRunning(name string) bool {
	p, ok := e.agent.PodState().Pod("default", name+"-e2e")
	return ok && p.Status.Phase == v1.PodRunning
}

func (e *env) countRunning() int {
	resp, err := e.rt.Runtime.ListContainers(bg(), &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(resp.Containers)
}

func (e *env) allSandboxes() []*runtimeapi.PodSandbox {
	resp, err := e.rt.Runtime.ListPodSandbox(bg(), &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.Items
}

func percentile(ds []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	return s[i]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
