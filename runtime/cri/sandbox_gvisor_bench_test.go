package cri_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/cgroupfs"
	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// BenchmarkGvisorPodStart starts pods of one container (RunPodSandbox, then CreateContainer and
// StartContainer) on runc and on runsc in the same run, and prints for each handler the median
// and p90 of RunPodSandbox, of Create+Start and of the whole pod start, what one running pod
// costs the host (its cgroup's working set: for runsc the Sentry and gofers, for runc the
// container), and the runsc/runc ratio of the medians. No CNI: the network plugin is nil.
//
//	go test -run '^$' -bench GvisorPodStart -benchtime 1x ./runtime/cri/
func BenchmarkGvisorPodStart(b *testing.B) {
	const pods = 10
	type figures struct{ runp, start, total, memMB float64 }
	got := map[string]figures{}
	for i := 0; i < b.N; i++ {
		for _, handler := range []string{"runc", "runsc"} {
			e := runtimetest.Start(b)
			var runp, start, total []time.Duration
			var ids []string
			for j := 0; j < pods; j++ {
				pod := e.PodWithLogs(fmt.Sprintf("start-%d", j))
				t0 := time.Now()
				sb := e.RunPod(pod, handler)
				t1 := time.Now()
				e.RunContainer(sb, pod, runtimetest.ContainerConfig("c", "sleep", "100000"))
				t2 := time.Now()
				runp, start, total = append(runp, t1.Sub(t0)), append(start, t2.Sub(t1)), append(total, t2.Sub(t0))
				ids = append(ids, sb)
			}
			var mem uint64
			for _, id := range ids {
				resp, err := e.Runtime.PodSandboxStatus(e.Ctx(), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
				if err != nil {
					b.Fatal(err)
				}
				var info struct {
					CgroupParent string `json:"cgroupParent"`
				}
				if err := json.Unmarshal([]byte(resp.Info["info"]), &info); err != nil {
					b.Fatal(err)
				}
				m, err := cgroupfs.Host().Memory(info.CgroupParent)
				if err != nil {
					b.Fatal(err)
				}
				mem += m.WorkingSet()
			}
			f := figures{memMB: float64(mem) / pods / (1 << 20)}
			for _, m := range []struct {
				name string
				d    []time.Duration
				p50  *float64
			}{{"RunPodSandbox", runp, &f.runp}, {"Create+StartContainer", start, &f.start}, {"pod start", total, &f.total}} {
				p50, p90 := percentiles(m.d)
				*m.p50 = p50
				fmt.Printf("%-6s %-22s median %7.1f ms  p90 %7.1f ms  (n=%d)\n", handler, m.name, p50, p90, len(m.d))
				b.ReportMetric(p50, handler+"-"+strings.ReplaceAll(m.name, " ", "-")+"-p50-ms")
			}
			fmt.Printf("%-6s working set of a running pod's cgroup: %.1f MB\n", handler, f.memMB)
			b.ReportMetric(f.memMB, handler+"-pod-MB")
			got[handler] = f
			for _, id := range ids {
				if _, err := e.Runtime.StopPodSandbox(e.Ctx(), &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
					b.Fatal(err)
				}
				if _, err := e.Runtime.RemovePodSandbox(e.Ctx(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	r, g := got["runc"], got["runsc"]
	if r.total > 0 {
		fmt.Printf("runsc/runc: RunPodSandbox %.1fx, Create+Start %.1fx, pod start %.1fx, pod memory %.1fx\n",
			g.runp/r.runp, g.start/r.start, g.total/r.total, g.memMB/r.memMB)
	}
}
