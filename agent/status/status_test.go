package status

import (
	"context"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/harness/kubefake"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

func mkPod(policy v1.RestartPolicy, inits []string, apps ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"}}
	p.Spec.RestartPolicy = policy
	for _, n := range inits {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: n, Image: "busybox"})
	}
	for _, n := range apps {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n, Image: "busybox"})
	}
	return p
}

func c(name string, st kubecontainer.State, code int32, restarts int) *kubecontainer.Status {
	t := time.Unix(1000, 0)
	return &kubecontainer.Status{ID: name + "-id", Name: name, State: st, ExitCode: code, RestartCount: restarts,
		StartedAt: t, FinishedAt: t.Add(time.Second), ImageRef: "sha256:img"}
}

func ps(cs ...*kubecontainer.Status) *kubecontainer.PodStatus {
	return &kubecontainer.PodStatus{ID: "u1", IPs: []string{"10.0.0.5"}, ContainerStatuses: cs,
		SandboxStatuses: []*runtimeapi.PodSandboxStatus{{Id: "sb", State: runtimeapi.PodSandboxState_SANDBOX_READY}}}
}

func TestGeneratePhase(t *testing.T) {
	R, E, C := kubecontainer.StateRunning, kubecontainer.StateExited, kubecontainer.StateCreated
	crashing := kubecontainer.NewReasonCache()
	crashing.Update("u1", "a", kubecontainer.ErrCrashLoopBackOff)
	tests := []struct {
		name    string
		pod     *v1.Pod
		status  *kubecontainer.PodStatus
		reasons *kubecontainer.ReasonCache
		phase   v1.PodPhase
		ready   bool
		state   string // of the first app container
	}{
		{"nothing yet", mkPod(v1.RestartPolicyAlways, nil, "a"), ps(), nil, v1.PodPending, false, "waiting:ContainerCreating"},
		{"running", mkPod(v1.RestartPolicyAlways, nil, "a", "b"), ps(c("a", R, 0, 0), c("b", R, 0, 0)), nil, v1.PodRunning, true, "running"},
		{"one created", mkPod(v1.RestartPolicyAlways, nil, "a", "b"), ps(c("a", C, 0, 0), c("b", R, 0, 0)), nil, v1.PodPending, false, "waiting:ContainerCreating"},
		{"crash loop", mkPod(v1.RestartPolicyAlways, nil, "a"), ps(c("a", E, 1, 3)), crashing, v1.PodRunning, false, "waiting:CrashLoopBackOff"},
		{"never: succeeded", mkPod(v1.RestartPolicyNever, nil, "a", "b"), ps(c("a", E, 0, 0), c("b", E, 0, 0)), nil, v1.PodSucceeded, false, "terminated:Completed"},
		{"never: failed", mkPod(v1.RestartPolicyNever, nil, "a", "b"), ps(c("a", E, 0, 0), c("b", E, 2, 0)), nil, v1.PodFailed, false, "terminated:Completed"},
		{"on failure: failed one restarts", mkPod(v1.RestartPolicyOnFailure, nil, "a"), ps(c("a", E, 2, 0)), nil, v1.PodRunning, false, "terminated:Error"},
		{"init running", mkPod(v1.RestartPolicyAlways, []string{"i"}, "a"), ps(c("i", R, 0, 0)), nil, v1.PodPending, false, "waiting:PodInitializing"},
		{"sidecar running, app running", sidecarPod(), ps(c("side", R, 0, 0), c("a", R, 0, 0)), nil, v1.PodRunning, true, "running"},
		{"sidecar not started", sidecarPod(), ps(), nil, v1.PodPending, false, "waiting:PodInitializing"},
		{"job with sidecar done", sidecarNeverPod(), ps(c("side", E, 137, 0), c("a", E, 0, 0)), nil, v1.PodSucceeded, false, "terminated:Completed"},
		{"init failed, never", mkPod(v1.RestartPolicyNever, []string{"i"}, "a"), ps(c("i", E, 1, 0)), nil, v1.PodFailed, false, "waiting:PodInitializing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.reasons
			if r == nil {
				r = kubecontainer.NewReasonCache()
			}
			s := Generate(tt.pod, tt.status, v1.PodStatus{}, Inputs{Reasons: r, RuntimeName: "fake", Now: time.Unix(2000, 0)})
			if s.Phase != tt.phase {
				t.Errorf("phase %s, want %s", s.Phase, tt.phase)
			}
			ready := false
			for _, cond := range s.Conditions {
				if cond.Type == v1.PodReady {
					ready = cond.Status == v1.ConditionTrue
				}
			}
			if ready != tt.ready {
				t.Errorf("ready %v, want %v", ready, tt.ready)
			}
			st := s.ContainerStatuses[0].State
			got := ""
			switch {
			case st.Running != nil:
				got = "running"
			case st.Waiting != nil:
				got = "waiting:" + st.Waiting.Reason
			case st.Terminated != nil:
				got = "terminated:" + st.Terminated.Reason
			}
			if got != tt.state {
				t.Errorf("state %s, want %s", got, tt.state)
			}
			if s.PodIP != "10.0.0.5" {
				t.Errorf("pod IP %q", s.PodIP)
			}
		})
	}
}

func TestGenerateRestartCountAndLastState(t *testing.T) {
	pod := mkPod(v1.RestartPolicyAlways, nil, "a")
	s := Generate(pod, ps(c("a", kubecontainer.StateRunning, 0, 2), c("a", kubecontainer.StateExited, 137, 1)), v1.PodStatus{},
		Inputs{Reasons: kubecontainer.NewReasonCache(), RuntimeName: "containerd", Now: time.Now()})
	cs := s.ContainerStatuses[0]
	if cs.RestartCount != 2 || cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 137 {
		t.Fatalf("status %+v", cs)
	}
	if cs.ContainerID != "containerd://a-id" || cs.ImageID != "sha256:img" || !cs.Ready {
		t.Fatalf("status %+v", cs)
	}
}

type mirrors map[string]*v1.Pod

func (m mirrors) GetMirrorPodByPod(p *v1.Pod) (*v1.Pod, bool) { x, ok := m[p.Name]; return x, ok }

func TestManagerPatchesOnlyOnChange(t *testing.T) {
	pod := mkPod(v1.RestartPolicyAlways, nil, "a")
	client := fake.NewSimpleClientset(pod.DeepCopy())
	m := NewManager(kubefake.Wrap(client), mirrors{}, nil)
	s := Generate(pod, ps(c("a", kubecontainer.StateRunning, 0, 0)), v1.PodStatus{}, Inputs{Reasons: kubecontainer.NewReasonCache(), Now: time.Now()})
	if !m.SetPodStatus(pod, s) {
		t.Fatal("first status not a change")
	}
	m.SyncBatch(context.Background())
	if m.SetPodStatus(pod, s) {
		t.Fatal("same status counted as a change")
	}
	m.SyncBatch(context.Background())
	patches := 0
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
			patches++
		}
	}
	if patches != 1 {
		t.Fatalf("%d patches, want 1", patches)
	}
	got, err := client.CoreV1().Pods("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != v1.PodRunning {
		t.Fatalf("apiserver phase %q", got.Status.Phase)
	}
	local, ok := m.GetPodStatus(pod.UID)
	if !ok || local.Phase != v1.PodRunning {
		t.Fatalf("local status %v %v", local.Phase, ok)
	}
}

func TestManagerWritesStaticPodStatusToMirror(t *testing.T) {
	static := mkPod(v1.RestartPolicyAlways, nil, "a")
	static.Annotations = map[string]string{configSourceAnnotation: "file"}
	mirror := static.DeepCopy()
	mirror.UID = "mirror-uid"
	client := fake.NewSimpleClientset(mirror.DeepCopy())
	m := NewManager(kubefake.Wrap(client), mirrors{"web": mirror}, nil)
	m.SetPodStatus(static, Generate(static, ps(c("a", kubecontainer.StateRunning, 0, 0)), v1.PodStatus{},
		Inputs{Reasons: kubecontainer.NewReasonCache(), Now: time.Now()}))
	m.SyncBatch(context.Background())
	got, _ := client.CoreV1().Pods("default").Get(context.Background(), "web", metav1.GetOptions{})
	if got.Status.Phase != v1.PodRunning {
		t.Fatalf("mirror status %q", got.Status.Phase)
	}
}

func TestPodTerminatedDeletesAPIObject(t *testing.T) {
	pod := mkPod(v1.RestartPolicyAlways, nil, "a")
	now := metav1.Now()
	pod.DeletionTimestamp = &now
	client := fake.NewSimpleClientset(pod.DeepCopy())
	m := NewManager(kubefake.Wrap(client), nil, nil)
	if err := m.PodTerminated(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	_, err := client.CoreV1().Pods("default").Get(context.Background(), "web", metav1.GetOptions{})
	if err == nil {
		t.Fatal("pod still exists")
	}
}

func sidecarPod() *v1.Pod {
	p := mkPod(v1.RestartPolicyAlways, []string{"side"}, "a")
	always := v1.ContainerRestartPolicyAlways
	p.Spec.InitContainers[0].RestartPolicy = &always
	return p
}

func sidecarNeverPod() *v1.Pod {
	p := sidecarPod()
	p.Spec.RestartPolicy = v1.RestartPolicyNever
	return p
}
