//go:build cluster

package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkEvictionLatency prints how long the agent takes from memory crossing a threshold to the
// pod using it being evicted (Failed in the apiserver), median and p90 over -benchtime pods: with
// the kubelet's cadence (signals read every 10 s, the kubelet's housekeeping interval), and with
// kernelMemcgNotification, on nodelet's runtime. The pods' cgroup is capped at 640Mi with
// allocatableMemory.available<200Mi; each pod fills a memory emptyDir to 400Mi, logs a line, then
// writes 64Mi more: the crossing is at that line's CRI log timestamp (within the 64Mi's write).
// Run: go test -tags cluster -run '^$' -bench EvictionLatency -benchtime 5x ./agent/integration/
func BenchmarkEvictionLatency(b *testing.B) {
	for _, mode := range []struct {
		name   string
		notify bool
	}{{"kubelet-cadence-10s", false}, {"memcg-notification", true}} {
		b.Run(mode.name, func(b *testing.B) {
			e := newEnv(b, onNodelet)
			client := startPressureNode(b, e, 10*time.Second, mode.notify)
			ctx := context.Background()
			var lat []time.Duration
			for i := 0; i < b.N; i++ {
				name := fmt.Sprintf("hog-%d", i)
				pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
					Spec: v1.PodSpec{NodeName: "e2e", HostNetwork: true,
						Volumes: []v1.Volume{{Name: "m", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}},
						Containers: []v1.Container{{Name: "c", Image: e.reg + "/busybox:1", Command: []string{"/bin/sh", "-c",
							"dd if=/dev/zero of=/m/a bs=1048576 count=400 2>/dev/null; echo crossing; " +
								"dd if=/dev/zero of=/m/b bs=1048576 count=64 2>/dev/null; sleep 3600"},
							VolumeMounts: []v1.VolumeMount{{Name: "m", MountPath: "/m"}}}}}}
				if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
				var evicted time.Time
				e.eventually(name+" evicted", func() bool {
					if podPhase(ctx, client, name) == v1.PodFailed {
						evicted = time.Now()
						return true
					}
					return false
				})
				if p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); err == nil && len(p.Status.ContainerStatuses) == 0 {
					b.Fatalf("%s failed before it ran: %s %s", name, p.Status.Reason, p.Status.Message)
				}
				crossing := logLineTime(b, e.cfg.Kubelet.PodLogsDir, name, "crossing")
				lat = append(lat, evicted.Sub(crossing))
				grace := int64(0)
				client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
				// The Node may not show the pressure yet: wait for it to come, then to go.
				saw := false
				e.eventually("pressure reported, then gone", func() bool {
					c := nodeCondition(ctx, client, v1.NodeMemoryPressure)
					saw = saw || c == v1.ConditionTrue
					return saw && c == v1.ConditionFalse
				})
			}
			b.ReportMetric(ms(percentile(lat, 50)), "evict-median-ms")
			b.ReportMetric(ms(percentile(lat, 90)), "evict-p90-ms")
		})
	}
}

// logLineTime is the CRI timestamp of the pod's log line text (its only container "c").
func logLineTime(tb testing.TB, logsDir, pod, text string) time.Time {
	paths, _ := filepath.Glob(filepath.Join(logsDir, "default_"+pod+"_*", "c", "0.log"))
	if len(paths) != 1 {
		tb.Fatalf("log of %s: %v", pod, paths)
	}
	f, err := os.Open(paths[0])
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		ts, rest, _ := strings.Cut(sc.Text(), " ")
		if strings.HasSuffix(rest, " "+text) {
			t, err := time.Parse(time.RFC3339Nano, ts)
			if err != nil {
				tb.Fatal(err)
			}
			return t
		}
	}
	tb.Fatalf("no %q line in %s", text, paths[0])
	return time.Time{}
}
