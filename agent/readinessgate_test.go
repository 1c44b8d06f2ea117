package agent

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodelet/nodelet/test/harness/kubefake"
)

// A readiness gate's condition set through the apiserver by someone else reaches the pod's Ready
// through the apiserver watch alone: the periodic sync is an hour away, so only the status update
// the pod source delivers can wake the worker that writes Ready.
func TestReadinessGateChangeReachesReady(t *testing.T) {
	h := newHarness(t)
	h.cfg.Kubelet.SyncFrequency.Duration = time.Hour
	const gate = "example.com/lb"
	grace := int64(1)
	apiPod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gated", Namespace: "default", UID: "gated-uid"},
		Spec: v1.PodSpec{NodeName: "node1", RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
			ReadinessGates: []v1.PodReadinessGate{{ConditionType: gate}},
			Containers:     []v1.Container{{Name: "c", Image: "busybox:1", ImagePullPolicy: v1.PullIfNotPresent}}}}
	client := fake.NewSimpleClientset(apiPod)
	h.start(Deps{KubeClient: kubefake.Wrap(client)})
	ctx := context.Background()
	pods := client.CoreV1().Pods("default")
	ready := func(want v1.ConditionStatus, reason string) func() bool {
		return func() bool {
			p, err := pods.Get(ctx, "gated", metav1.GetOptions{})
			if err != nil {
				return false
			}
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodReady {
					return c.Status == want && c.Reason == reason
				}
			}
			return false
		}
	}
	h.eventually("Ready False on the missing gate", ready(v1.ConditionFalse, "ReadinessGatesNotReady"))

	setGate := func(s v1.ConditionStatus) {
		t.Helper()
		p, err := pods.Get(ctx, "gated", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == gate {
				p.Status.Conditions[i].Status, found = s, true
			}
		}
		if !found {
			p.Status.Conditions = append(p.Status.Conditions, v1.PodCondition{Type: gate, Status: s, LastTransitionTime: metav1.Now()})
		}
		if _, err := pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setGate(v1.ConditionTrue)
	h.eventually("Ready True once the gate is", ready(v1.ConditionTrue, ""))
	setGate(v1.ConditionFalse)
	h.eventually("Ready False again", ready(v1.ConditionFalse, "ReadinessGatesNotReady"))
}
