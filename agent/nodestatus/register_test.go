package nodestatus

import (
	"context"
	goruntime "runtime"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodelet/nodelet/test/harness/fakecri"
	"github.com/nodelet/nodelet/test/harness/kubefake"
)

// A Node registered before (by another agent, or by hand) gets back the default labels and the
// attach/detach annotation, as the kubelet reconciles them; labels others set stay.
func TestRegisterReconcilesAnExistingNode(t *testing.T) {
	ctx := context.Background()
	cri := fakecri.Start(t)
	client := fake.NewSimpleClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1",
		Labels:      map[string]string{v1.LabelOSStable: "plan9", "team": "storage"},
		Annotations: map[string]string{"note": "kept"}}})
	inUse := []v1.UniqueVolumeName{"kubernetes.io/csi/a.example.com^vol-1"}
	m := New(Deps{Client: kubefake.Wrap(client), Runtime: cri.Runtime(), NodeName: "n1", MaxPods: 10,
		VolumesInUse: func() []v1.UniqueVolumeName { return inUse }})
	if err := m.Register(ctx); err != nil {
		t.Fatal(err)
	}
	node, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Labels[v1.LabelOSStable] != goruntime.GOOS || node.Labels[v1.LabelHostname] != "n1" || node.Labels["team"] != "storage" {
		t.Fatalf("labels after registration: %v", node.Labels)
	}
	if node.Annotations[ControllerManagedAttachAnnotation] != "true" || node.Annotations["note"] != "kept" {
		t.Fatalf("annotations after registration: %v", node.Annotations)
	}
	if !slices.Equal(node.Status.VolumesInUse, inUse) {
		t.Fatalf("volumesInUse %v, want %v", node.Status.VolumesInUse, inUse)
	}

	// Nothing to reconcile: no patch.
	client.ClearActions()
	if err := m.Register(ctx); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "patch" {
			t.Fatalf("a registered node in order was patched: %v", a)
		}
	}

	// A volume released leaves the list at the next update.
	inUse = nil
	if err := m.UpdateStatus(ctx); err != nil {
		t.Fatal(err)
	}
	node, _ = client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if len(node.Status.VolumesInUse) != 0 {
		t.Fatalf("volumesInUse after release: %v", node.Status.VolumesInUse)
	}
}

func TestNewNodeIsAttachedByTheController(t *testing.T) {
	ctx := context.Background()
	client := fake.NewSimpleClientset()
	if err := New(Deps{Client: kubefake.Wrap(client), NodeName: "n2", MaxPods: 10}).Register(ctx); err != nil {
		t.Fatal(err)
	}
	node, _ := client.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{})
	if node.Annotations[ControllerManagedAttachAnnotation] != "true" {
		t.Fatalf("annotations %v", node.Annotations)
	}
}
