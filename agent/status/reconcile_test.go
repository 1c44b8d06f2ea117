package status

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/test/harness/kubefake"
)

func TestNeedsReadinessReconcile(t *testing.T) {
	const gate = "example.com/lb"
	notTrue := `the status of pod readiness gate "example.com/lb" is not "True", but False`
	missing := `corresponding condition of pod readiness gate "example.com/lb" does not exist.`
	mk := func(gates bool, ctrReady bool, gateStatus v1.ConditionStatus, ready *v1.PodCondition) *v1.Pod {
		p := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}}}
		if gates {
			p.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: gate}}
		}
		p.Status.Phase = v1.PodRunning
		p.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", Ready: ctrReady}}
		if gateStatus != "" {
			p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: gate, Status: gateStatus})
		}
		if ready != nil {
			p.Status.Conditions = append(p.Status.Conditions, *ready)
		}
		return p
	}
	cond := func(s v1.ConditionStatus, msg string) *v1.PodCondition {
		return &v1.PodCondition{Type: v1.PodReady, Status: s, Message: msg}
	}
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want bool
	}{
		{"no gates", mk(false, true, "", cond(v1.ConditionFalse, "x")), false},
		{"no Ready yet", mk(true, true, v1.ConditionTrue, nil), false},
		{"gate turned True", mk(true, true, v1.ConditionTrue, cond(v1.ConditionFalse, notTrue)), true},
		{"gate turned False", mk(true, true, v1.ConditionFalse, cond(v1.ConditionTrue, "")), true},
		{"gate appeared False", mk(true, true, v1.ConditionFalse, cond(v1.ConditionFalse, missing)), true},
		{"consistent False", mk(true, true, v1.ConditionFalse, cond(v1.ConditionFalse, notTrue)), false},
		{"consistent True", mk(true, true, v1.ConditionTrue, cond(v1.ConditionTrue, "")), false},
		{"containers not ready", mk(true, false, v1.ConditionTrue, cond(v1.ConditionFalse, "containers with unready status: [app]")), false},
	} {
		if got := NeedsReadinessReconcile(tc.pod); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A readiness gate a controller sets after the agent made the pod's status, and before the status
// is written, stays as the controller set it: the write takes others' conditions as they are now.
func TestStatusWriteKeepsConditionsSetMeanwhile(t *testing.T) {
	pod := mkPod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.ReadinessGates = []v1.PodReadinessGate{{ConditionType: "example.com/lb"}}
	client := fake.NewSimpleClientset(pod.DeepCopy())
	m := NewManager(kubefake.Wrap(client), mirrors{}, nil)
	ctx := context.Background()
	m.SetPodStatus(pod, Generate(pod, ps(c("a", kubecontainer.StateRunning, 0, 0)), v1.PodStatus{},
		Inputs{Reasons: kubecontainer.NewReasonCache(), Now: time.Now()}))

	set, err := client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	set.Status.Conditions = append(set.Status.Conditions, v1.PodCondition{Type: "example.com/lb", Status: v1.ConditionTrue})
	if _, err := client.CoreV1().Pods("default").UpdateStatus(ctx, set, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	m.SyncBatch(ctx)

	got, err := client.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var gate, ready *v1.PodCondition
	for i, c := range got.Status.Conditions {
		switch c.Type {
		case "example.com/lb":
			gate = &got.Status.Conditions[i]
		case v1.PodReady:
			ready = &got.Status.Conditions[i]
		}
	}
	if gate == nil || gate.Status != v1.ConditionTrue {
		t.Fatalf("the controller's gate was lost or turned back: %+v", got.Status.Conditions)
	}
	if ready == nil || got.Status.Phase != v1.PodRunning {
		t.Fatalf("the agent's status was not written: %+v", got.Status)
	}
}
