package kuberuntime

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/metrics"
)

// counter reads one sample of the agent's registry: the sum over the series whose labels include want.
func counter(t *testing.T, name string, want map[string]string) float64 {
	t.Helper()
	families, err := metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}

// The started-pods and started-containers counters count what SyncPod starts, by container type.
func TestSyncPodCountsStarts(t *testing.T) {
	f := newFixture(t)
	f.cri.AddImage("busybox:1.36")
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.Containers[0].Image = "busybox:1.36"
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox:1.36"}}
	pods := counter(t, "kubelet_started_pods_total", nil)
	inits := counter(t, "kubelet_started_containers_total", map[string]string{"container_type": "init_container"})
	apps := counter(t, "kubelet_started_containers_total", map[string]string{"container_type": "container"})
	f.mustSync(pod)
	if d := counter(t, "kubelet_started_pods_total", nil) - pods; d != 1 {
		t.Errorf("started pods +%v, want +1", d)
	}
	if d := counter(t, "kubelet_started_containers_total", map[string]string{"container_type": "init_container"}) - inits; d != 1 {
		t.Errorf("started init containers +%v, want +1", d)
	}
	if d := counter(t, "kubelet_started_containers_total", map[string]string{"container_type": "container"}) - apps; d != 0 {
		t.Errorf("started app containers +%v before the init container finished, want 0", d)
	}
}
