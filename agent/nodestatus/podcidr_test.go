package nodestatus

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodelet/nodelet/test/harness/fakecri"
	"github.com/nodelet/nodelet/test/harness/kubefake"
)

// The runtime learns the Node's pod CIDRs once the cluster allocated them, and again only when
// they change; standalone it gets podCIDR.
func TestPodCIDRHandedToRuntime(t *testing.T) {
	ctx := context.Background()
	cri := fakecri.Start(t)
	client := fake.NewSimpleClientset()
	m := New(Deps{Client: kubefake.Wrap(client), Runtime: cri.Runtime(), NodeName: "n1", MaxPods: 10, PodCIDR: "10.1.0.0/24"})
	if err := m.Register(ctx); err != nil {
		t.Fatal(err)
	}
	m.syncPodCIDR(ctx)
	if got := cri.CallsWithPrefix("UpdateRuntimeConfig"); len(got) != 0 {
		t.Fatalf("no CIDR allocated yet, yet the runtime got %q (the standalone podCIDR is not for a cluster)", got)
	}
	node, _ := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	node.Spec.PodCIDR, node.Spec.PodCIDRs = "10.244.1.0/24", []string{"10.244.1.0/24", "fd00:1::/64"}
	if _, err := client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := m.UpdateStatus(ctx); err != nil {
			t.Fatal(err)
		}
		m.syncPodCIDR(ctx)
	}
	if got, want := cri.CallsWithPrefix("UpdateRuntimeConfig"), []string{"UpdateRuntimeConfig 10.244.1.0/24,fd00:1::/64"}; !slices.Equal(got, want) {
		t.Fatalf("runtime got %q, want %q", got, want)
	}

	standalone := fakecri.Start(t)
	s := New(Deps{Runtime: standalone.Runtime(), NodeName: "n2", MaxPods: 10, PodCIDR: "10.1.0.0/24"})
	s.Build(ctx)
	s.syncPodCIDR(ctx)
	if got, want := standalone.CallsWithPrefix("UpdateRuntimeConfig"), []string{"UpdateRuntimeConfig 10.1.0.0/24"}; !slices.Equal(got, want) {
		t.Fatalf("standalone runtime got %q, want %q", got, want)
	}
}
