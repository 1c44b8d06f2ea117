package status

import (
	"testing"

	v1 "k8s.io/api/core/v1"
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
