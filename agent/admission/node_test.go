package admission

import (
	"context"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/harness/kubefake"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// The lister serves its own Node and follows changes to it, so a taint added after registration
// decides the next admission. (The fake clientset ignores field selectors: that the watch is
// limited to this Node is not tested here.)
func TestNodeListerFollowsItsOwnNode(t *testing.T) {
	client := fake.NewClientset(
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{"zone": "a"}}},
		&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"}})
	l := NewNodeLister(kubefake.Wrap(client), nodeName)
	if _, err := l.Get(); err == nil {
		t.Fatal("a Node before Run")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	waitFor(t, func() bool { n, err := l.Get(); return err == nil && n.Labels["zone"] == "a" })
	n, _ := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	n.Spec.Taints = []v1.Taint{{Key: "k", Effect: v1.TaintEffectNoExecute}}
	if _, err := client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { n, err := l.Get(); return err == nil && len(n.Spec.Taints) == 1 })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
