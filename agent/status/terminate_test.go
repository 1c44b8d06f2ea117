package status

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/test/harness/kubefake"
)

func TestTerminatePodFailsAPodDeletedBeforeItRan(t *testing.T) {
	pod := mkPod(v1.RestartPolicyAlways, nil, "a")
	m := NewManager(nil, nil, nil)
	m.SetPodStatus(pod, generate(pod, ps()))
	m.TerminatePod(pod, time.Unix(3000, 0))
	got, _ := m.GetPodStatus(pod.UID)
	if got.Phase != v1.PodFailed {
		t.Fatalf("phase %q, want Failed", got.Phase)
	}
	term := got.ContainerStatuses[0].State.Terminated
	if term == nil || term.Reason != "ContainerStatusUnknown" || term.ExitCode != 137 ||
		term.Message != "The container could not be located when the pod was terminated" {
		t.Fatalf("container state %+v", got.ContainerStatuses[0].State)
	}
	for _, ct := range []v1.PodConditionType{v1.PodReady, v1.ContainersReady} {
		if c := condition(got, ct); c.Status != v1.ConditionFalse || c.Reason != "PodFailed" {
			t.Fatalf("%s condition %+v", ct, c)
		}
	}
}

func TestTerminatePodKeepsWhatIsKnown(t *testing.T) {
	E := kubecontainer.StateExited
	succeeded := mkPod(v1.RestartPolicyNever, nil, "a")
	static := mkPod(v1.RestartPolicyAlways, nil, "a")
	static.Annotations = map[string]string{configSourceAnnotation: "file"}
	for _, tc := range []struct {
		name  string
		pod   *v1.Pod
		ps    *kubecontainer.PodStatus
		phase v1.PodPhase
	}{
		{"succeeded stays succeeded", succeeded, ps(c("a", E, 0, 0)), v1.PodSucceeded},
		{"a static pod keeps its phase", static, ps(), v1.PodPending},
	} {
		m := NewManager(nil, nil, nil)
		m.SetPodStatus(tc.pod, generate(tc.pod, tc.ps))
		m.TerminatePod(tc.pod, time.Unix(3000, 0))
		got, _ := m.GetPodStatus(tc.pod.UID)
		if got.Phase != tc.phase {
			t.Errorf("%s: phase %q, want %q", tc.name, got.Phase, tc.phase)
		}
		if tc.phase == v1.PodSucceeded && got.ContainerStatuses[0].State.Terminated.Reason != "Completed" {
			t.Errorf("%s: container %+v", tc.name, got.ContainerStatuses[0].State)
		}
	}
}

func TestTerminatePodLeavesContainersNeverTriedWaiting(t *testing.T) {
	R := kubecontainer.StateRunning
	pod := mkPod(v1.RestartPolicyAlways, []string{"i1", "i2"}, "a")
	m := NewManager(nil, nil, nil)
	m.SetPodStatus(pod, generate(pod, ps(c("i1", R, 0, 0))))
	m.TerminatePod(pod, time.Unix(3000, 0))
	got, _ := m.GetPodStatus(pod.UID)
	if got.Phase != v1.PodFailed {
		t.Fatalf("phase %q", got.Phase)
	}
	if s := got.InitContainerStatuses[0].State.Terminated; s == nil || s.ExitCode != 137 {
		t.Fatalf("i1 (tried) %+v", got.InitContainerStatuses[0].State)
	}
	if got.InitContainerStatuses[1].State.Waiting == nil {
		t.Fatalf("i2 (never tried) %+v", got.InitContainerStatuses[1].State)
	}
	if got.ContainerStatuses[0].State.Waiting == nil {
		t.Fatalf("a (pod never initialized) %+v", got.ContainerStatuses[0].State)
	}
}

// A status that changes while an older one is being written is written after it, and
// PodTerminated's delete comes after the newest status was written.
func TestNewestStatusIsWrittenLast(t *testing.T) {
	R := kubecontainer.StateRunning
	pod := mkPod(v1.RestartPolicyAlways, nil, "a")
	now := metav1.Now()
	pod.DeletionTimestamp = &now
	client := fake.NewSimpleClientset(pod.DeepCopy())
	m := NewManager(kubefake.Wrap(client), nil, nil)
	var written []v1.PodPhase
	client.PrependReactor("patch", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		cur, _ := m.GetPodStatus(pod.UID)
		written = append(written, cur.Phase)
		if len(written) == 1 {
			// The pod ends while its Running status is on its way.
			m.SetPodStatus(pod, generate(pod, ps()))
			m.TerminatePod(pod, time.Unix(3000, 0))
		}
		return false, nil, nil
	})
	var atDelete v1.PodPhase
	client.PrependReactor("delete", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		got, _ := client.Tracker().Get(v1.SchemeGroupVersion.WithResource("pods"), "default", "web")
		atDelete = got.(*v1.Pod).Status.Phase
		return false, nil, nil
	})
	m.SetPodStatus(pod, generate(pod, ps(c("a", R, 0, 0))))
	m.SyncBatch(context.Background())
	if err := m.PodTerminated(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if atDelete != v1.PodFailed {
		t.Fatalf("apiserver phase at the delete %q (writes %v), want Failed", atDelete, written)
	}
}
