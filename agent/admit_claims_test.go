package agent

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/admission"
	"github.com/nodelet/nodelet/agent/agentconfig"
	"github.com/nodelet/nodelet/agent/internal/sysctl"
	"github.com/nodelet/nodelet/agent/nodestatus"
	"github.com/nodelet/nodelet/agent/syncloop"
)

// A pod asking for DRA devices fails admission: it never runs without them.
func TestAdmitRefusesResourceClaims(t *testing.T) {
	w, err := sysctl.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	capacity := func() v1.ResourceList { return nodestatus.Capacity(10, t.TempDir()) }
	a := &Agent{cfg: agentconfig.Config{MaxPods: 10}, sysctls: w,
		admission: admission.New(admission.AnyWay(nil, admission.LocalNode("n1", nil, nil)), capacity)}
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	if err := a.admit(pod, nil); err != nil {
		t.Fatalf("pod without claims: %v", err)
	}
	pod.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu"}}
	pod.Spec.Containers[0].Resources.Claims = []v1.ResourceClaim{{Name: "gpu"}}
	var ae *syncloop.AdmitError
	if err := a.admit(pod, nil); !errors.As(err, &ae) || ae.Reason != "FailedPrepareDynamicResources" ||
		ae.Message != `Failed to prepare dynamic resources: prepare dynamic resources: no DRA driver is registered for resource claim "gpu"` {
		t.Fatalf("got %v, want FailedPrepareDynamicResources", err)
	}
}
