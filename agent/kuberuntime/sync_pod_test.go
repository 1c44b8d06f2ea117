package kuberuntime

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/test/harness/fakecri"
)

type fixture struct {
	t   *testing.T
	cri *fakecri.Server
	m   *Manager
	now time.Time
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, cri: fakecri.Start(t), now: time.Now()}
	f.m = NewManager(Deps{
		Runtime: f.cri.Runtime(), Images: f.cri.Images(), RootDir: t.TempDir(), PodLogsDir: t.TempDir(),
		NodeName: "node1", Now: func() time.Time { return f.now },
		DNS: DNSConfigurer{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local"},
	})
	f.cri.SetClock(func() time.Time { return f.now })
	return f
}

func (f *fixture) status(pod *v1.Pod) *kubecontainer.PodStatus {
	f.t.Helper()
	st, err := f.m.GetPodStatus(context.Background(), pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		f.t.Fatalf("GetPodStatus: %v", err)
	}
	return st
}

func (f *fixture) sync(pod *v1.Pod) error {
	return f.m.SyncPod(context.Background(), pod, f.status(pod))
}

func (f *fixture) mustSync(pod *v1.Pod) {
	f.t.Helper()
	if err := f.sync(pod); err != nil {
		f.t.Fatalf("SyncPod: %v", err)
	}
}

func TestSyncPodStartsSandboxAndContainers(t *testing.T) {
	f := newFixture(t)
	f.cri.AddImage("busybox:1.36")
	pod := testPod(v1.RestartPolicyAlways, nil, "a", "b")
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].Image = "busybox:1.36"
		pod.Spec.Containers[i].Env = []v1.EnvVar{{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "GREETING", Value: "hi $(POD)"}}
		pod.Spec.Containers[i].Args = []string{"echo", "$(GREETING)"}
	}
	f.mustSync(pod)
	want := []string{"RunPodSandbox web", "CreateContainer web/a", "StartContainer a", "CreateContainer web/b", "StartContainer b"}
	if got := f.cri.Calls(); !slices.Equal(got, want) {
		t.Fatalf("calls %q, want %q", got, want)
	}
	sb := f.cri.Sandboxes()[0]
	for k, v := range map[string]string{kubecontainer.LabelPodName: "web", kubecontainer.LabelPodNamespace: "default", kubecontainer.LabelPodUID: "uid-1"} {
		if sb.Labels[k] != v {
			t.Errorf("sandbox label %s=%q, want %q", k, sb.Labels[k], v)
		}
	}
	c := f.cri.Containers()[0]
	if c.Labels[kubecontainer.LabelContainerName] != "a" || c.Annotations[AnnotationRestartCount] != "0" || c.Annotations[AnnotationContainerHash] == "" {
		t.Errorf("container labels %v annotations %v", c.Labels, c.Annotations)
	}
	// A second sync with everything running changes nothing.
	f.cri.ResetCalls()
	f.mustSync(pod)
	if got := f.cri.Calls(); len(got) != 0 {
		t.Fatalf("steady state sync made calls %q", got)
	}
}

func TestGenerateConfigs(t *testing.T) {
	f := newFixture(t)
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	c := &pod.Spec.Containers[0]
	c.Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: 8080, Protocol: v1.ProtocolTCP}}
	c.Env = []v1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "$(A)-$$(A)"}}
	c.Command = []string{"sh", "-c", "$(B)"}
	pod.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	c.VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
	sb, err := f.m.generatePodSandboxConfig(context.Background(), pod, 0)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Hostname != "web" || len(sb.PortMappings) != 1 || sb.PortMappings[0].HostPort != 8080 {
		t.Errorf("sandbox config %v", sb)
	}
	if got := sb.DnsConfig.Searches; !slices.Equal(got, []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local"}) {
		t.Errorf("dns searches %v", got)
	}
	cfg, err := f.m.generateContainerConfig(context.Background(), pod, c, 3, "sha256:abc", []string{"10.0.0.2"})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Command; !slices.Equal(got, []string{"sh", "-c", "1-$(A)"}) {
		t.Errorf("command %q", got)
	}
	if cfg.LogPath != "a/3.log" || cfg.Metadata.Attempt != 3 || len(cfg.Mounts) != 2 || !strings.HasSuffix(cfg.Mounts[0].HostPath, "kubernetes.io~empty-dir/scratch") ||
		cfg.Mounts[1].ContainerPath != "/etc/hosts" {
		t.Errorf("config %v", cfg)
	}
	if cfg.Linux.Resources.OomScoreAdj != oomBestEffort || len(cfg.Linux.SecurityContext.MaskedPaths) == 0 {
		t.Errorf("linux config %v", cfg.Linux)
	}
	pod.Spec.Volumes[0].VolumeSource = v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s"}}
	if _, err := f.m.generateContainerConfig(context.Background(), pod, c, 0, "x", nil); err == nil {
		t.Error("secret volume accepted; want a clear error")
	}
}

func TestCrashLoopBackOff(t *testing.T) {
	f := newFixture(t)
	f.cri.AddImage("busybox:1")
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.Containers[0].Image = "busybox:1"
	f.mustSync(pod)

	// First crash: restarted at once, restart count 1.
	f.cri.ExitContainer(f.cri.RunningContainer("a"), 1)
	f.mustSync(pod)
	id := f.cri.RunningContainer("a")
	if id == "" {
		t.Fatal("container not restarted after first crash")
	}
	st := f.status(pod)
	if got := st.FindContainerStatusByName("a").RestartCount; got != 1 {
		t.Fatalf("restart count %d, want 1", got)
	}

	// Second crash: back-off 10s.
	f.cri.ExitContainer(id, 1)
	err := f.sync(pod)
	if !errors.Is(err, kubecontainer.ErrCrashLoopBackOff) {
		t.Fatalf("sync after second crash: %v, want CrashLoopBackOff", err)
	}
	var ra interface{ RetryAfter() time.Duration }
	if !errors.As(err, &ra) || ra.RetryAfter() <= 0 || ra.RetryAfter() > 10*time.Second {
		t.Fatalf("retry hint missing or wrong: %v", err)
	}
	if r, ok := f.m.Reasons.Get(pod.UID, "a"); !ok || r.Reason != kubecontainer.ReasonCrashLoopBackOff {
		t.Fatalf("reason cache %v %v", r, ok)
	}
	f.now = f.now.Add(11 * time.Second)
	f.mustSync(pod)
	if f.cri.RunningContainer("a") == "" {
		t.Fatal("container not restarted after back-off")
	}
	if got := f.status(pod).FindContainerStatusByName("a").RestartCount; got != 2 {
		t.Fatalf("restart count %d, want 2", got)
	}
	// Old dead attempts are pruned to one.
	dead := 0
	for _, c := range f.cri.Containers() {
		if c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			dead++
		}
	}
	f.mustSync(pod)
	if dead > 2 {
		t.Fatalf("%d dead attempts kept", dead)
	}
}

func TestImagePullBackOff(t *testing.T) {
	f := newFixture(t)
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.Containers[0].Image = "nosuch:1"
	f.cri.FailPull("nosuch:1", errors.New("manifest unknown"))
	if err := f.sync(pod); !errors.Is(err, kubecontainer.ErrImagePull) {
		t.Fatalf("first sync: %v, want ErrImagePull", err)
	}
	if err := f.sync(pod); !errors.Is(err, kubecontainer.ErrImagePullBackOff) {
		t.Fatalf("second sync: %v, want ImagePullBackOff", err)
	}
	if got := len(f.cri.CallsWithPrefix("PullImage")); got != 1 {
		t.Fatalf("%d pulls during back-off, want 1", got)
	}
	f.cri.FailPull("nosuch:1", nil)
	f.now = f.now.Add(11 * time.Second)
	f.mustSync(pod)
	if f.cri.RunningContainer("a") == "" {
		t.Fatal("not running after the image became pullable")
	}

	never := testPod(v1.RestartPolicyAlways, nil, "n")
	never.UID = "uid-2"
	never.Spec.Containers[0].Image = "absent:1"
	never.Spec.Containers[0].ImagePullPolicy = v1.PullNever
	if err := f.sync(never); !errors.Is(err, kubecontainer.ErrImageNeverPull) {
		t.Fatalf("PullNever: %v", err)
	}
}

func TestImagePullPolicies(t *testing.T) {
	f := newFixture(t)
	f.cri.AddImage("busybox:1")
	f.cri.AddImage("busybox:latest")
	for _, tc := range []struct {
		image  string
		policy v1.PullPolicy
		pulls  int
	}{
		{"busybox:1", "", 0},
		{"busybox", "", 1},
		{"busybox:1", v1.PullAlways, 1},
		{"busybox:1", v1.PullIfNotPresent, 0},
		{"other:1", v1.PullIfNotPresent, 1},
	} {
		f.cri.ResetCalls()
		c := &v1.Container{Name: "a", Image: tc.image, ImagePullPolicy: tc.policy}
		if _, err := f.m.imageManager.EnsureImageExists(context.Background(), testPod(v1.RestartPolicyAlways, nil), c, nil); err != nil {
			t.Fatal(err)
		}
		if got := len(f.cri.CallsWithPrefix("PullImage")); got != tc.pulls {
			t.Errorf("%s policy %q: %d pulls, want %d", tc.image, tc.policy, got, tc.pulls)
		}
	}
}

func TestInitContainersRunInOrder(t *testing.T) {
	f := newFixture(t)
	pod := testPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a")
	f.mustSync(pod)
	if f.cri.RunningContainer("i1") == "" || f.cri.RunningContainer("i2") != "" || f.cri.RunningContainer("a") != "" {
		t.Fatalf("after first sync: %q", f.cri.Calls())
	}
	f.mustSync(pod) // i1 still running: nothing new
	f.cri.ExitContainer(f.cri.RunningContainer("i1"), 0)
	f.mustSync(pod)
	if f.cri.RunningContainer("i2") == "" || f.cri.RunningContainer("a") != "" {
		t.Fatalf("after i1 finished: %q", f.cri.Calls())
	}
	f.cri.ExitContainer(f.cri.RunningContainer("i2"), 0)
	f.mustSync(pod)
	if f.cri.RunningContainer("a") == "" {
		t.Fatalf("app not started after inits: %q", f.cri.Calls())
	}
	want := []string{"StartContainer i1", "StartContainer i2", "StartContainer a"}
	if got := f.cri.CallsWithPrefix("StartContainer"); !slices.Equal(got, want) {
		t.Fatalf("starts %q, want %q", got, want)
	}
}

func TestSandboxRecreatedAfterDeath(t *testing.T) {
	f := newFixture(t)
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	f.mustSync(pod)
	first := f.cri.Sandboxes()[0].Id
	f.cri.KillSandbox(first)
	f.mustSync(pod)
	st := f.status(pod)
	if len(st.SandboxStatuses) == 0 || st.SandboxStatuses[0].Id == first || st.SandboxStatuses[0].Metadata.Attempt != 1 {
		t.Fatalf("sandbox not recreated with attempt 1: %v", st.SandboxStatuses)
	}
	if f.cri.RunningContainer("a") == "" {
		t.Fatal("container not running in the new sandbox")
	}
	if got := st.FindContainerStatusByName("a").RestartCount; got != 1 {
		t.Fatalf("restart count %d after sandbox recreation, want 1", got)
	}
}

func TestKillPodRunsPreStopThenStopsWithGrace(t *testing.T) {
	f := newFixture(t)
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	grace := int64(20)
	pod.Spec.TerminationGracePeriodSeconds = &grace
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"nginx", "-s", "quit"}}}}
	f.mustSync(pod)
	f.cri.ResetCalls()
	if err := f.m.KillPod(context.Background(), pod, f.status(pod), nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"ExecSync a [nginx -s quit]", "StopContainer a timeout=20"}
	got := f.cri.Calls()
	if len(got) < 3 || !slices.Equal(got[:2], want) || !strings.HasPrefix(got[2], "StopPodSandbox") {
		t.Fatalf("calls %q, want %q then StopPodSandbox", got, want)
	}

	// An orphan (no spec) is killed from what its labels recorded.
	f.cri.ResetCalls()
	f.mustSync(pod)
	if err := f.m.KillPod(context.Background(), nil, f.status(pod), nil); err != nil {
		t.Fatal(err)
	}
	if got := f.cri.CallsWithPrefix("StopContainer"); !slices.Equal(got, []string{"StopContainer a timeout=20"}) {
		t.Fatalf("orphan kill %q", got)
	}
	if got := f.cri.CallsWithPrefix("ExecSync"); len(got) != 1 {
		t.Fatalf("orphan preStop %q", got)
	}

	if err := f.m.RemovePod(context.Background(), f.status(pod)); err != nil {
		t.Fatal(err)
	}
	if len(f.cri.Containers()) != 0 || len(f.cri.Sandboxes()) != 0 {
		t.Fatal("RemovePod left objects behind")
	}
}

func TestGetPodsGroupsByLabels(t *testing.T) {
	f := newFixture(t)
	p1 := testPod(v1.RestartPolicyAlways, nil, "a", "b")
	p2 := testPod(v1.RestartPolicyAlways, nil, "c")
	p2.UID, p2.Name = "uid-2", "db"
	f.mustSync(p1)
	f.mustSync(p2)
	pods, err := f.m.GetPods(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 2 || len(pods[0].Containers) != 2 || pods[1].Name != "db" || len(pods[1].SandboxIDs) != 1 {
		t.Fatalf("pods %+v", pods)
	}
}

type creds map[string]string

func (c creds) For(_ context.Context, _ *v1.Pod, image string) []*runtimeapi.AuthConfig {
	if u, ok := c[image]; ok {
		return []*runtimeapi.AuthConfig{{Username: "wrong"}, {Username: u, Password: "pw"}}
	}
	return nil
}

func TestPullUsesPodCredentials(t *testing.T) {
	f := newFixture(t)
	f.cri.RequireAuth("private.example/app:1", "alice")
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.Containers[0].Image = "private.example/app:1"
	if err := f.sync(pod); !errors.Is(err, kubecontainer.ErrImagePull) {
		t.Fatalf("anonymous pull: %v", err)
	}
	d := f.m.Deps
	d.Credentials = creds{"private.example/app:1": "alice"}
	f.m = NewManager(d)
	f.now = f.now.Add(11 * time.Second)
	f.mustSync(pod)
	if f.cri.RunningContainer("a") == "" {
		t.Fatal("not running with credentials")
	}
}

func TestRuntimeClassPicksHandler(t *testing.T) {
	f := newFixture(t)
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	gvisor := "gvisor"
	pod.Spec.RuntimeClassName = &gvisor
	f.mustSync(pod)
	if got := f.cri.CallsWithPrefix("handler"); !slices.Equal(got, []string{"handler gvisor"}) {
		t.Fatalf("handler calls %q", got)
	}
}

// cancelOnCreate cancels the sync's context once the runtime created a container, as a pod
// deletion does while a container is being started.
type cancelOnCreate struct {
	runtimeapi.RuntimeServiceClient
	cancel context.CancelFunc
}

func (c cancelOnCreate) CreateContainer(ctx context.Context, r *runtimeapi.CreateContainerRequest, o ...grpc.CallOption) (*runtimeapi.CreateContainerResponse, error) {
	resp, err := c.RuntimeServiceClient.CreateContainer(ctx, r, o...)
	c.cancel()
	return resp, err
}

// A deletion that lands between CreateContainer and StartContainer does not cut the start: the
// container runs (and the kill then stops it) rather than ending as a StartError that never ran.
func TestStartIsNotCutByCancellation(t *testing.T) {
	f := newFixture(t)
	f.cri.AddImage("busybox:1.36")
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.Containers[0].Image = "busybox:1.36"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.m.Runtime = cancelOnCreate{f.m.Runtime, cancel}
	if err := f.m.SyncPod(ctx, pod, f.status(pod)); err != nil {
		t.Fatalf("SyncPod: %v", err)
	}
	if got, want := f.cri.Calls(), []string{"RunPodSandbox web", "CreateContainer web/a", "StartContainer a"}; !slices.Equal(got, want) {
		t.Fatalf("calls %q, want %q", got, want)
	}
	if c := f.cri.Containers()[0]; c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("container %s, want running", c.State)
	}
}
