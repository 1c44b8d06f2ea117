package podsource

import (
	"context"
	"testing"

	"github.com/nodelet/nodelet/test/harness/kubefake"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// `kubectl debug` changes nothing but spec.ephemeralContainers, through the ephemeralcontainers
// subresource. That must reach the SyncLoop as an UPDATE of the pod, or its worker never wakes to
// start the debug container.
func TestAddingAnEphemeralContainerIsAnUpdate(t *testing.T) {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "1"},
		Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "app", Image: "busybox"}}}}
	client := fake.NewSimpleClientset(pod.DeepCopy())
	c := NewPodConfig(nil)
	s := &APISource{Client: kubefake.Wrap(client), NodeName: "n1", Set: c.Set}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	if u := recv(t, c); u.Op != ADD || len(u.Pods) != 1 {
		t.Fatalf("first update %v %v", u.Op, names(u.Pods))
	}

	debug := pod.DeepCopy()
	debug.Spec.EphemeralContainers = []v1.EphemeralContainer{{TargetContainerName: "app",
		EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger", Image: "busybox", Stdin: true, TTY: true}}}
	if _, err := client.CoreV1().Pods("ns").UpdateEphemeralContainers(ctx, "web", debug, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	u := recv(t, c)
	if u.Op != UPDATE || len(u.Pods) != 1 || len(u.Pods[0].Spec.EphemeralContainers) != 1 {
		t.Fatalf("after kubectl debug: %v %v", u.Op, names(u.Pods))
	}
}
