package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/agent/cm/cpumanager"
)

// BenchmarkPinnedPodStartup prints, for each runtime, how long a Guaranteed `cpu: 1` static pod
// takes from its manifest being written to its container running, with the static CPU policy
// (the container is created on its exclusive CPU) and without a CPU manager (policy none), over
// 10 pods one after another, each removed before the next so the exclusive CPU is free again.
// Run: go test -run '^$' -bench PinnedPodStartup -benchtime 1x ./agent/integration/
func BenchmarkPinnedPodStartup(b *testing.B) {
	for _, rt := range []struct {
		name  string
		start func(t testing.TB, dir, reg string) *criRuntime
	}{
		{"containerd", onContainerd},
		{"nodelet", onNodelet},
	} {
		medians := map[string]time.Duration{}
		for _, policy := range []string{cpumanager.PolicyNone, cpumanager.PolicyStatic} {
			b.Run(rt.name+"/"+policy, func(b *testing.B) {
				e := newEnv(b, rt.start)
				e.cfg.Kubelet.CPUManagerPolicy = policy
				if policy == cpumanager.PolicyStatic {
					e.cfg.Kubelet.ReservedSystemCPUs = "0"
				}
				e.startAgent()
				write := func(name string) {
					body := fmt.Sprintf(cpuPodTmpl, name, e.reg+"/busybox:1", guaranteedOneCPU)
					if err := os.WriteFile(filepath.Join(e.manifests, name+".yaml"), []byte(body), 0o644); err != nil {
						b.Fatal(err)
					}
				}
				remove := func(name string) {
					os.Remove(filepath.Join(e.manifests, name+".yaml"))
					e.eventually(name+" gone", func() bool { return len(e.sandboxes(name)) == 0 })
				}
				write("warm")
				e.eventually("warm-up pod running", func() bool { return len(running(e.containers("warm"))) == 1 })
				remove("warm")

				const n = 10
				var took []time.Duration
				for i := range n {
					name := fmt.Sprintf("g%02d", i)
					start := time.Now()
					write(name)
					for len(running(e.containers(name))) != 1 {
						if time.Since(start) > 90*time.Second {
							b.Fatalf("pod %s not running", name)
						}
						time.Sleep(time.Millisecond)
					}
					took = append(took, time.Since(start))
					if policy == cpumanager.PolicyStatic {
						b, _ := os.ReadFile(filepath.Join(e.cfg.RootDir, cpumanager.StateFile))
						if !strings.Contains(string(b), `{"app":"`) {
							e.t.Fatalf("pod %s has no exclusive CPU: %s", name, b)
						}
					}
					remove(name)
				}
				medians[policy] = percentile(took, 50)
				b.ReportMetric(ms(percentile(took, 50)), "start-median-ms")
				b.ReportMetric(ms(percentile(took, 90)), "start-p90-ms")
			})
		}
		if medians[cpumanager.PolicyNone] > 0 {
			b.Logf("%s: static/none median start = %.2f", rt.name, float64(medians[cpumanager.PolicyStatic])/float64(medians[cpumanager.PolicyNone]))
		}
	}
}
