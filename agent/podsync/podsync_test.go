package podsync

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/internal/podpath"
	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/kuberuntime"
	"github.com/nodelet/nodelet/agent/podmanager"
	"github.com/nodelet/nodelet/agent/podworkers"
	"github.com/nodelet/nodelet/agent/status"
	"github.com/nodelet/nodelet/test/harness/fakecri"
)

func newSyncer(t *testing.T) (*Syncer, *fakecri.Server, *status.Manager) {
	cri := fakecri.Start(t)
	reasons := kubecontainer.NewReasonCache()
	m := kuberuntime.NewManager(kuberuntime.Deps{Runtime: cri.Runtime(), Images: cri.Images(), Reasons: reasons,
		RootDir: t.TempDir(), PodLogsDir: t.TempDir()})
	st := status.NewManager(nil, nil, nil)
	return &Syncer{Runtime: m, Status: st, Pods: podmanager.New(), Reasons: reasons, RootDir: t.TempDir()}, cri, st
}

func apiPod(phase v1.PodPhase) *v1.Pod {
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u1"},
		Spec:   v1.PodSpec{RestartPolicy: v1.RestartPolicyNever, Containers: []v1.Container{{Name: "c", Image: "busybox:1"}}},
		Status: v1.PodStatus{Phase: phase}}
}

func TestFinishedPodNeverRunsAgain(t *testing.T) {
	s, cri, _ := newSyncer(t)
	terminal, err := s.SyncPod(context.Background(), podworkers.SyncPodCreate, apiPod(v1.PodSucceeded), nil)
	if err != nil || !terminal {
		t.Fatalf("terminal %v err %v", terminal, err)
	}
	if calls := cri.CallsWithPrefix("RunPodSandbox"); len(calls) != 0 {
		t.Fatalf("a finished pod was started: %q", calls)
	}
}

func TestSyncPodPublishesStatusRightAfterStart(t *testing.T) {
	s, cri, st := newSyncer(t)
	cri.AddImage("busybox:1")
	pod := apiPod("")
	if _, err := s.SyncPod(context.Background(), podworkers.SyncPodCreate, pod, nil); err != nil {
		t.Fatal(err)
	}
	got, ok := st.GetPodStatus(pod.UID)
	if !ok || got.Phase != v1.PodRunning || got.PodIP == "" {
		t.Fatalf("status after the first sync: %+v", got)
	}
	// The container finishes: the pod is Succeeded and terminal.
	cri.ExitContainer(cri.RunningContainer("c"), 0)
	terminal, err := s.SyncPod(context.Background(), podworkers.SyncPodSync, pod, nil)
	if err != nil || !terminal {
		t.Fatalf("terminal %v err %v", terminal, err)
	}
	if err := s.SyncTerminatingPod(context.Background(), pod, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SyncTerminatedPod(context.Background(), pod, true); err != nil {
		t.Fatal(err)
	}
	if len(cri.Containers()) != 0 || len(cri.Sandboxes()) != 0 {
		t.Fatal("deleted pod left objects in the runtime")
	}
	// Put back with the same UID (a static pod file restored): it runs again.
	if terminal, err := s.SyncPod(context.Background(), podworkers.SyncPodCreate, pod, nil); err != nil || terminal {
		t.Fatalf("re-added pod: terminal %v err %v", terminal, err)
	}
	if cri.RunningContainer("c") == "" {
		t.Fatal("re-added pod not running")
	}
}

// TestRemovePodDirRefusesClimbingUID: an orphan reported by the runtime with UID "../../decoy"
// must not have base/decoy removed as its pod folder.
func TestRemovePodDirRefusesClimbingUID(t *testing.T) {
	for _, uid := range []types.UID{"../../decoy", "..", "a/../../../decoy"} {
		t.Run(string(uid), func(t *testing.T) {
			s, _, _ := newSyncer(t)
			base := t.TempDir()
			s.RootDir = filepath.Join(base, "root")
			decoy := filepath.Join(base, "decoy")
			if err := os.MkdirAll(decoy, 0o755); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(decoy, "keep"), []byte("k"), 0o644)
			if err := s.removePodDir(uid); !errors.Is(err, podpath.ErrUnsafe) {
				t.Fatalf("removePodDir: %v, want ErrUnsafe", err)
			}
			if b, err := os.ReadFile(filepath.Join(decoy, "keep")); err != nil || string(b) != "k" {
				t.Fatalf("decoy harmed: %q %v", b, err)
			}
		})
	}
}

type fakeCgroups struct {
	cri     *fakecri.Server
	calls   []string
	failPod error
}

func (f *fakeCgroups) EnsurePod(pod *v1.Pod) error {
	// The pod cgroup must exist before the runtime puts the sandbox in it.
	f.calls = append(f.calls, "EnsurePod", "sandboxes:"+string(rune('0'+len(f.cri.Sandboxes()))))
	return f.failPod
}

func (f *fakeCgroups) UpdateQoS() error {
	f.calls = append(f.calls, "UpdateQoS")
	return nil
}

func TestPodCgroupMadeBeforeTheSandbox(t *testing.T) {
	s, cri, _ := newSyncer(t)
	cri.AddImage("busybox:1")
	cg := &fakeCgroups{cri: cri, failPod: errors.New("no cgroup")}
	s.Cgroups = cg
	pod := apiPod("")
	if _, err := s.SyncPod(context.Background(), podworkers.SyncPodCreate, pod, nil); err == nil {
		t.Fatal("a pod whose cgroup could not be made was synced")
	}
	if len(cri.Sandboxes()) != 0 {
		t.Fatal("sandbox started without its pod cgroup")
	}
	cg.failPod = nil
	if _, err := s.SyncPod(context.Background(), podworkers.SyncPodSync, pod, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SyncTerminatingPod(context.Background(), pod, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"EnsurePod", "sandboxes:0", "EnsurePod", "sandboxes:0", "UpdateQoS"}
	if len(cg.calls) != len(want) {
		t.Fatalf("calls %v, want %v", cg.calls, want)
	}
	for i := range want {
		if cg.calls[i] != want[i] {
			t.Fatalf("calls %v, want %v", cg.calls, want)
		}
	}
}

// A host-network pod's status.podIP env reference is the node's IP, as the kubelet's: the runtime
// reports no IP for its sandbox (the e2e spec "should provide host IP and pod IP as an env var if
// pod uses host network" compares the two).
func TestHostNetworkPodIPIsTheNodes(t *testing.T) {
	s, cri, st := newSyncer(t)
	s.NodeIPs = []string{"192.0.2.7"}
	cri.AddImage("busybox:1")
	pod := apiPod("")
	pod.Spec.HostNetwork = true
	pod.Spec.Containers[0].Env = []v1.EnvVar{
		{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
		{Name: "POD_IPS", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIPs"}}}}
	if _, err := s.SyncPod(context.Background(), podworkers.SyncPodCreate, pod, nil); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range cri.ContainerConfig(cri.RunningContainer("c")).Envs {
		env[kv.Key] = string(kv.Value)
	}
	if env["POD_IP"] != "192.0.2.7" || env["POD_IPS"] != "192.0.2.7" {
		t.Fatalf("env %v, want POD_IP and POD_IPS 192.0.2.7", env)
	}
	if got, _ := st.GetPodStatus(pod.UID); got.PodIP != "192.0.2.7" {
		t.Fatalf("published podIP %q", got.PodIP)
	}
}
