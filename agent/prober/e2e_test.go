package prober

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/test/harness/crirt"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// TestProbesInRealContainer probes a busybox httpd on nodelet's runtime with every handler but
// grpc (busybox serves none; the unit test covers it), then breaks it and watches each verdict flip.
func TestProbesInRealContainer(t *testing.T) {
	rt := crirt.Start(t, filepath.Join(t.TempDir(), "rt"))
	image := rt.Push(t, "busybox:probes", nil)
	rt.Pull(t, image)
	port := freePort(t)
	p := rt.RunPod(t, "probes", "uid-probes", t.TempDir())
	id := rt.Start(t, p, "web", 0, image, []string{"sh", "-c",
		"mkdir -p /www && echo ok > /www/healthz && touch /tmp/alive && exec httpd -f -p 127.0.0.1:" + strconv.Itoa(port) + " -h /www"})

	probe := func(h v1.ProbeHandler) *v1.Probe {
		return &v1.Probe{ProbeHandler: h, PeriodSeconds: 1, FailureThreshold: 1, TimeoutSeconds: 60}
	}
	c := v1.Container{Name: "web", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: int32(port)}},
		StartupProbe:   probe(v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromString("http")}}),
		ReadinessProbe: probe(v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}),
		LivenessProbe:  probe(v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"test", "-e", "/tmp/alive"}}}),
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probes", UID: "uid-probes"}, Spec: v1.PodSpec{Containers: []v1.Container{c}}}
	// The startup probe allows one failure; it must not meet httpd before it listens.
	rt.WaitListening(t, id, port)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := New(rt.RS, nil, nil)
	go m.Run(ctx)
	defer m.RemovePod(pod.UID)
	m.SyncPod(pod, &kubecontainer.PodStatus{ID: pod.UID, IPs: []string{"127.0.0.1"},
		ContainerStatuses: []*kubecontainer.Status{{ID: id, Name: "web", State: kubecontainer.StateRunning, StartedAt: time.Now()}}})

	waitFor(t, "started and ready", func() bool { return m.Started(&c, id) && m.Ready(&c, id) })
	if bad, why := m.Unhealthy(id); bad {
		t.Fatalf("unhealthy: %s", why)
	}
	rt.Exec(t, id, "rm", "/www/healthz")
	waitFor(t, "not ready", func() bool { return !m.Ready(&c, id) })
	rt.Exec(t, id, "rm", "/tmp/alive")
	waitFor(t, "liveness failure", func() bool { bad, _ := m.Unhealthy(id); return bad })
}

// TestGRPCProbeInRealContainer probes a gRPC health server running in a container on nodelet's runtime.
func TestGRPCProbeInRealContainer(t *testing.T) {
	rt := crirt.Start(t, filepath.Join(t.TempDir(), "rt"))
	image := rt.PushFiles(t, "health:1", map[string][]byte{"bin/healthserver": crirt.HealthServer(t)})
	rt.Pull(t, image)
	port := freePort(t)
	p := rt.RunPod(t, "grpc", "uid-grpc", t.TempDir())
	id := rt.Start(t, p, "srv", 0, image, []string{"/bin/healthserver", "-listen", "127.0.0.1:" + strconv.Itoa(port)})
	c := v1.Container{Name: "srv", ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: int32(port)}},
		PeriodSeconds: 1, FailureThreshold: 1, TimeoutSeconds: 5}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "grpc", UID: "uid-grpc"}, Spec: v1.PodSpec{Containers: []v1.Container{c}}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := New(rt.RS, nil, nil)
	go m.Run(ctx)
	defer m.RemovePod(pod.UID)
	m.SyncPod(pod, &kubecontainer.PodStatus{ID: pod.UID, IPs: []string{"127.0.0.1"},
		ContainerStatuses: []*kubecontainer.Status{{ID: id, Name: "srv", State: kubecontainer.StateRunning, StartedAt: time.Now()}}})
	waitFor(t, "ready through grpc", func() bool { return m.Ready(&c, id) })
	rt.Exec(t, id, "touch", "/tmp/unhealthy")
	waitFor(t, "not ready through grpc", func() bool { return !m.Ready(&c, id) })
}

// TestProbesOverThePodNetwork probes a pod with its own network namespace on a CNI bridge: the
// handlers reach the pod's IP, not loopback.
func TestProbesOverThePodNetwork(t *testing.T) {
	rt := crirt.StartWithNetwork(t, filepath.Join(t.TempDir(), "rt"), "nle2e7", "10.247.0.0/24")
	image := rt.PushFiles(t, "health:net", map[string][]byte{"bin/healthserver": crirt.HealthServer(t)})
	rt.Pull(t, image)
	p, ip := rt.RunPodNetwork(t, "net", "uid-net", t.TempDir())
	web := rt.Start(t, p, "web", 0, image, []string{"sh", "-c", "mkdir -p /www && echo ok > /www/ok && exec httpd -f -p 8080 -h /www"})
	grpcID := rt.Start(t, p, "grpc", 0, image, []string{"/bin/healthserver", "-listen", ":9090"})
	probe := func(h v1.ProbeHandler) *v1.Probe {
		return &v1.Probe{ProbeHandler: h, PeriodSeconds: 1, FailureThreshold: 1, TimeoutSeconds: 60}
	}
	cs := []v1.Container{
		{Name: "web", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			ReadinessProbe: probe(v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/ok", Port: intstr.FromString("http")}}),
			StartupProbe:   probe(v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(8080)}})},
		{Name: "grpc", ReadinessProbe: probe(v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9090}})},
	}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "net", UID: "uid-net"}, Spec: v1.PodSpec{Containers: cs}}
	// The startup probe allows one failure; it must not meet httpd before it listens.
	rt.WaitListening(t, web, 8080)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := New(rt.RS, nil, nil)
	go m.Run(ctx)
	defer m.RemovePod(pod.UID)
	now := time.Now()
	m.SyncPod(pod, &kubecontainer.PodStatus{ID: pod.UID, IPs: []string{ip}, ContainerStatuses: []*kubecontainer.Status{
		{ID: web, Name: "web", State: kubecontainer.StateRunning, StartedAt: now},
		{ID: grpcID, Name: "grpc", State: kubecontainer.StateRunning, StartedAt: now}}})
	waitFor(t, "both ready over the pod IP "+ip, func() bool { return m.Ready(&cs[0], web) && m.Ready(&cs[1], grpcID) })
}

// freePort is a loopback TCP port nothing listens on now, for a server in a host-network container.
func freePort(t *testing.T) int { return testutil.FreePort(t) }
