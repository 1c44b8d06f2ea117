package status

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodelet/nodelet/test/harness/kubefake"
)

// A rejected pod is never desired: housekeeping must not forget its Failed status before the
// apiserver has it, and forgets it after.
func TestOrphanedFinalStatusIsWrittenFirst(t *testing.T) {
	pod := mkPod(v1.RestartPolicyAlways, nil, "a")
	client := fake.NewSimpleClientset(pod.DeepCopy())
	m := NewManager(kubefake.Wrap(client), mirrors{}, nil)
	m.SetPodStatus(pod, v1.PodStatus{Phase: v1.PodFailed, Reason: "AppArmor", Message: "Pod was rejected: x"})
	m.RemoveOrphanedStatuses(map[types.UID]bool{})
	if _, ok := m.GetPodStatus(pod.UID); !ok {
		t.Fatal("an unwritten Failed status was forgotten")
	}
	m.SyncBatch(context.Background())
	got, err := client.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
	if err != nil || got.Status.Phase != v1.PodFailed || got.Status.Reason != "AppArmor" {
		t.Fatalf("apiserver status %+v, %v", got.Status, err)
	}
	m.RemoveOrphanedStatuses(map[types.UID]bool{})
	if _, ok := m.GetPodStatus(pod.UID); ok {
		t.Fatal("a written status of a pod no longer desired was kept")
	}
}
