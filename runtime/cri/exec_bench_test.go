package cri_test

import (
	"io"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// BenchmarkExecStream measures a streamed exec as `kubectl exec` does it: the Exec RPC, the SPDY
// upgrade on the streaming server, runc exec of `true`, and the exit status back. It prints the
// median and p90.
//
//	go test -run '^$' -bench ExecStream -benchtime 100x ./runtime/cri/
func BenchmarkExecStream(b *testing.B) {
	e := runtimetest.Start(b)
	pod := runtimetest.PodConfig("bench-exec")
	sb := e.RunPod(pod, "")
	id := e.RunContainer(sb, pod, runtimetest.ContainerConfig("sleeper", "sleep", "1000"))
	var d []time.Duration
	for b.Loop() {
		t0 := time.Now()
		resp, err := e.Runtime.Exec(e.Ctx(), &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"true"}, Stdout: true})
		if err != nil {
			b.Fatal(err)
		}
		if err := streamB(b, resp.Url, remotecommand.StreamOptions{Stdout: io.Discard}); err != nil {
			b.Fatal(err)
		}
		d = append(d, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(d)
	p50, p90 := d[len(d)/2], d[len(d)*9/10]
	b.ReportMetric(float64(p50.Microseconds())/1000, "exec-p50-ms")
	b.ReportMetric(float64(p90.Microseconds())/1000, "exec-p90-ms")
}
