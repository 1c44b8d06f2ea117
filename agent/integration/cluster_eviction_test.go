//go:build cluster

package integration

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodelet/nodelet/agent/agentconfig"
)

func TestClusterEvictionOnNodeletRuntime(t *testing.T) { evictionScenario(t, newEnv(t, onNodelet)) }
func TestClusterEvictionOnContainerd(t *testing.T)     { evictionScenario(t, newEnv(t, onContainerd)) }

// evictionScenario stages memory pressure on the pods' cgroup, where nothing but the test's pods
// runs: systemReserved leaves the pods 640Mi (enforceNodeAllocatable pods caps kubepods there), and
// the hard memory.available<200Mi also guards allocatableMemory.available, as with the kubelet. A
// BestEffort pod filling a memory-backed emptyDir with 512Mi crosses it: that pod is evicted (Failed,
// Evicted, the kubelet's message), a small Burstable pod keeps running, the node reports
// MemoryPressure, and the condition goes back once the transition period has passed.
func evictionScenario(t *testing.T, e *env) {
	client := startPressureNode(t, e, time.Second, true)
	ctx := context.Background()
	wait := "trap 'exit 0' TERM; while true; do sleep 1; done"
	fourMi := resource.MustParse("4Mi")
	small := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "small", Namespace: "default"},
		Spec: v1.PodSpec{NodeName: "e2e", HostNetwork: true, Containers: []v1.Container{{Name: "c", Image: e.reg + "/busybox:1",
			Command: []string{"/bin/sh", "-c", wait},
			Resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("32Mi")},
				Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}}}}}}
	hog := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "hog", Namespace: "default"},
		Spec: v1.PodSpec{NodeName: "e2e", HostNetwork: true,
			Volumes: []v1.Volume{{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}}}},
			Containers: []v1.Container{{Name: "c", Image: e.reg + "/busybox:1",
				Command:      []string{"/bin/sh", "-c", "dd if=/dev/zero of=/cache/fill bs=1048576 count=512; " + wait},
				VolumeMounts: []v1.VolumeMount{{Name: "cache", MountPath: "/cache"}}}}}}
	if _, err := client.CoreV1().Pods("default").Create(ctx, small, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the Burstable pod running", func() bool { return podPhase(ctx, client, "small") == v1.PodRunning })
	if c := nodeCondition(ctx, client, v1.NodeMemoryPressure); c != v1.ConditionFalse {
		t.Fatalf("MemoryPressure %q before any pressure, want False", c)
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, hog, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	sawPressure := false
	e.eventually("the BestEffort pod evicted", func() bool {
		sawPressure = sawPressure || nodeCondition(ctx, client, v1.NodeMemoryPressure) == v1.ConditionTrue
		p, err := client.CoreV1().Pods("default").Get(ctx, "hog", metav1.GetOptions{})
		return err == nil && p.Status.Phase == v1.PodFailed
	})
	p, _ := client.CoreV1().Pods("default").Get(ctx, "hog", metav1.GetOptions{})
	if p.Status.Reason != "Evicted" || !strings.Contains(p.Status.Message, "The node was low on resource: memory") {
		t.Errorf("evicted pod's status: reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	e.eventually("MemoryPressure reported", func() bool {
		sawPressure = sawPressure || nodeCondition(ctx, client, v1.NodeMemoryPressure) == v1.ConditionTrue
		return sawPressure
	})
	// The evicted pod's memory volume is given back, so the pressure ends; the condition stays
	// for the transition period, then goes. By then many passes have run without pressure.
	e.eventually("MemoryPressure gone after the transition period", func() bool {
		return nodeCondition(ctx, client, v1.NodeMemoryPressure) == v1.ConditionFalse
	})
	if ph := podPhase(ctx, client, "small"); ph != v1.PodRunning {
		t.Errorf("the Burstable pod under its requests is %s, want Running: only the BestEffort pod should go", ph)
	}
	expectEvents(t, ctx, client, "Evicted/hog", "EvictionThresholdMet/e2e", "NodeHasInsufficientMemory/e2e")

	// Local storage: an emptyDir on disk written past its sizeLimit gets its pod evicted, whatever
	// the node's state.
	spill := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "spill", Namespace: "default"},
		Spec: v1.PodSpec{NodeName: "e2e", HostNetwork: true,
			Volumes: []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{SizeLimit: &fourMi}}}},
			Containers: []v1.Container{{Name: "c", Image: e.reg + "/busybox:1",
				Command:      []string{"/bin/sh", "-c", "dd if=/dev/zero of=/data/fill bs=1048576 count=8; " + wait},
				VolumeMounts: []v1.VolumeMount{{Name: "data", MountPath: "/data"}}}}}}
	if _, err := client.CoreV1().Pods("default").Create(ctx, spill, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("the pod over its emptyDir sizeLimit evicted", func() bool { return podPhase(ctx, client, "spill") == v1.PodFailed })
	p, _ = client.CoreV1().Pods("default").Get(ctx, "spill", metav1.GetOptions{})
	if want := `Usage of EmptyDir volume "data" exceeds the limit "4Mi". `; p.Status.Reason != "Evicted" || p.Status.Message != want {
		t.Errorf("spill: reason %q message %q, want Evicted %q", p.Status.Reason, p.Status.Message, want)
	}
	if ph := podPhase(ctx, client, "small"); ph != v1.PodRunning {
		t.Errorf("the Burstable pod is %s after the local storage eviction, want Running", ph)
	}

	// PID pressure: the pod with the most processes goes, the small one stays.
	fork := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fork", Namespace: "default"},
		Spec: v1.PodSpec{NodeName: "e2e", HostNetwork: true, Containers: []v1.Container{{Name: "c", Image: e.reg + "/busybox:1",
			Command: []string{"/bin/sh", "-c", "i=0; while [ $i -lt 2000 ]; do sleep 3600 & i=$((i+1)); done; " + wait}}}}}
	e.eventually("no PIDPressure before the forking pod", func() bool { return nodeCondition(ctx, client, v1.NodePIDPressure) == v1.ConditionFalse })
	if _, err := client.CoreV1().Pods("default").Create(ctx, fork, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sawPIDPressure := false
	e.eventually("the forking pod evicted", func() bool {
		sawPIDPressure = sawPIDPressure || nodeCondition(ctx, client, v1.NodePIDPressure) == v1.ConditionTrue
		return podPhase(ctx, client, "fork") == v1.PodFailed
	})
	p, _ = client.CoreV1().Pods("default").Get(ctx, "fork", metav1.GetOptions{})
	if p.Status.Reason != "Evicted" || !strings.Contains(p.Status.Message, "The node was low on resource: pids") {
		t.Errorf("fork: reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	e.eventually("PIDPressure reported, then gone after the transition period", func() bool {
		c := nodeCondition(ctx, client, v1.NodePIDPressure)
		sawPIDPressure = sawPIDPressure || c == v1.ConditionTrue
		return sawPIDPressure && c == v1.ConditionFalse
	})
	if ph := podPhase(ctx, client, "small"); ph != v1.PodRunning {
		t.Errorf("the small pod is %s after the PID eviction, want Running", ph)
	}

	for _, name := range []string{"small", "hog", "spill", "fork"} {
		grace := int64(0)
		client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	}
	e.eventually("pods gone from the runtime", func() bool { return len(e.allSandboxes()) == 0 })
}

// startPressureNode starts the control plane and the agent with the pods' cgroup capped at 640Mi
// (systemReserved, enforceNodeAllocatable pods), hard thresholds memory.available<200Mi (so
// allocatableMemory.available<200Mi on the pods' cgroup) and pid.available 1000 tasks below what is
// free now — far beyond what the test's own daemons start — and a 5 s transition period, and waits
// for the Node to be Ready.
func startPressureNode(t testing.TB, e *env, interval time.Duration, memcgNotification bool) kubernetes.Interface {
	client := e.joinLoopbackCluster(t)
	e.cfg.Kubelet.SystemReserved = map[string]string{"memory": strconv.FormatInt(memTotal(t)-640<<20, 10)}
	e.cfg.Kubelet.EnforceNodeAllocatable = nil // the kubelet's default: pods
	e.cfg.Kubelet.EvictionHard = map[string]string{"memory.available": "200Mi", "pid.available": strconv.FormatInt(pidAvailable(t)-1000, 10)}
	e.cfg.EvictionMonitoringInterval = interval
	e.cfg.Kubelet.EvictionPressureTransitionPeriod.Duration = 5 * time.Second
	e.cfg.Kubelet.KernelMemcgNotification = memcgNotification
	if err := agentconfig.Complete(&e.cfg); err != nil {
		t.Fatal(err)
	}
	e.startAgent()
	e.eventually("node Ready", func() bool { return nodeCondition(context.Background(), client, v1.NodeReady) == v1.ConditionTrue })
	return client
}

// nodeCondition is the status of the e2e Node's condition, "" when it cannot be read.
func nodeCondition(ctx context.Context, client kubernetes.Interface, typ v1.NodeConditionType) v1.ConditionStatus {
	n, err := client.CoreV1().Nodes().Get(ctx, "e2e", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	for _, c := range n.Status.Conditions {
		if c.Type == typ {
			return c.Status
		}
	}
	return ""
}

func podPhase(ctx context.Context, client kubernetes.Interface, name string) v1.PodPhase {
	p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return p.Status.Phase
}

func memTotal(t testing.TB) int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no MemTotal in /proc/meminfo")
	return 0
}

// pidAvailable is pid.available now: min(pid_max, threads-max) less the tasks there are.
func pidAvailable(t testing.TB) int64 {
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	limit, err := strconv.ParseInt(read("/proc/sys/kernel/pid_max"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	if th, err := strconv.ParseInt(read("/proc/sys/kernel/threads-max"), 10, 64); err == nil && th < limit {
		limit = th
	}
	f := strings.Fields(read("/proc/loadavg"))
	_, total, _ := strings.Cut(f[3], "/")
	n, err := strconv.ParseInt(total, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return limit - n
}

// expectEvents fails the test for each wanted event ("Reason/object name") the apiserver lacks.
func expectEvents(t *testing.T, ctx context.Context, client kubernetes.Interface, want ...string) {
	t.Helper()
	evs, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, ev := range evs.Items {
		reasons = append(reasons, ev.Reason+"/"+ev.InvolvedObject.Name)
	}
	for _, w := range want {
		if !strings.Contains(strings.Join(reasons, " "), w) {
			t.Errorf("no %s event; events: %v", w, reasons)
		}
	}
}
