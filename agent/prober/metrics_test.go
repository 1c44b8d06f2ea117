package prober

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/metrics"
)

// probeCount reads prober_probe_total for one result of the test pod's liveness probe.
func probeCount(t *testing.T, result string) float64 {
	t.Helper()
	mfs, err := metrics.ProbesRegistry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "prober_probe_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["pod_uid"] == "metrics-uid" && l["probe_type"] == "Liveness" && l["result"] == result &&
				l["container"] == "app" && l["pod"] == "mp" && l["namespace"] == "ns" {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestProbeRunsAreCounted: every run of a probe counts in prober_probe_total by its result, as
// /metrics/probes serves it, and the series go with the probe.
func TestProbeRunsAreCounted(t *testing.T) {
	m, id, cri := runningManager(t, nil)
	c := v1.Container{Name: "app", LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
		PeriodSeconds: 1, FailureThreshold: 100}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "mp", Namespace: "ns", UID: "metrics-uid"}, Spec: v1.PodSpec{Containers: []v1.Container{c}}}
	ps := &kubecontainer.PodStatus{ID: "metrics-uid", ContainerStatuses: []*kubecontainer.Status{{ID: id, Name: "app", State: kubecontainer.StateRunning, StartedAt: time.Now()}}}
	m.SyncPod(pod, ps)
	waitFor(t, "a successful run counted", func() bool { return probeCount(t, "successful") >= 1 })
	cri.SetExecExitCode(1)
	waitFor(t, "a failed run counted", func() bool { return probeCount(t, "failed") >= 1 })
	mfs, _ := metrics.ProbesRegistry().Gather()
	started := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "process_start_time_seconds" {
			started = mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	if started <= 0 || started > float64(time.Now().Unix()) {
		t.Errorf("process_start_time_seconds %v", started)
	}
	m.RemovePod("metrics-uid")
	waitFor(t, "the series dropped", func() bool { return probeCount(t, "successful") == 0 && probeCount(t, "failed") == 0 })
}
