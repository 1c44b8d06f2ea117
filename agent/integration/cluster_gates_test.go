//go:build cluster

package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestClusterReadinessGateAndExtendedResources: what others write into the statuses the agent
// keeps survives it and takes effect. A readiness gate's condition patched through the apiserver
// makes the pod Ready with the periodic sync an hour away (the watch wakes the pod's worker), and an
// extended resource patched into the Node's capacity stays there, with allocatable following it,
// across the agent's status updates.
func TestClusterReadinessGateAndExtendedResources(t *testing.T) {
	e := newEnv(t, onNodelet)
	cpDir := filepath.Join(t.TempDir(), "cp")
	os.MkdirAll(cpDir, 0o755)
	admin := startControlPlane(t, cpDir)
	client := kubeClient(t, admin)
	ctx := context.Background()
	e.cfg.Kubeconfig = admin
	e.cfg.NodeIPs = []string{"127.0.0.1"}
	e.cfg.Kubelet.NodeStatusUpdateFrequency.Duration, e.cfg.Kubelet.NodeStatusReportFrequency.Duration = time.Second, time.Second
	e.cfg.Kubelet.SyncFrequency.Duration = time.Hour
	e.startAgent()
	e.eventually("node Ready", func() bool { return nodeCondition(ctx, client, v1.NodeReady) == v1.ConditionTrue })

	const gate = "example.com/lb"
	grace := int64(2)
	pods := client.CoreV1().Pods("default")
	if _, err := pods.Create(ctx, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gated"},
		Spec: v1.PodSpec{NodeName: "e2e", TerminationGracePeriodSeconds: &grace,
			ReadinessGates: []v1.PodReadinessGate{{ConditionType: gate}},
			Containers:     []v1.Container{{Name: "c", Image: e.reg + "/busybox:1", Command: []string{"/bin/sh", "-c", loop}}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ready := func(want v1.ConditionStatus) func() bool {
		return func() bool {
			p, err := pods.Get(ctx, "gated", metav1.GetOptions{})
			if err != nil {
				return false
			}
			for _, c := range p.Status.Conditions {
				if c.Type == v1.PodReady {
					return c.Status == want && (want == v1.ConditionTrue || c.Reason == "ReadinessGatesNotReady")
				}
			}
			return false
		}
	}
	e.eventually("running, not Ready for its gate", ready(v1.ConditionFalse))
	patch := `{"status":{"conditions":[{"type":"` + gate + `","status":"True"}]}}`
	if _, err := pods.Patch(ctx, "gated", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	e.eventually("Ready once the gate is True", ready(v1.ConditionTrue))

	// kubectl patch node e2e --subresource=status --type=json -p '[{"op":"add","path":"/status/capacity/example.com~1dongle","value":"4"}]'
	nodes := client.CoreV1().Nodes()
	dongle := `[{"op":"add","path":"/status/capacity/example.com~1dongle","value":"4"}]`
	if _, err := nodes.Patch(ctx, "e2e", types.JSONPatchType, []byte(dongle), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	patched := time.Now()
	var node *v1.Node
	e.eventually("two status updates after the patch", func() bool {
		n, err := nodes.Get(ctx, "e2e", metav1.GetOptions{})
		if err != nil {
			return false
		}
		node = n
		for _, c := range n.Status.Conditions {
			if c.Type == v1.NodeReady {
				return c.LastHeartbeatTime.After(patched.Add(2 * time.Second))
			}
		}
		return false
	})
	c, a := node.Status.Capacity["example.com/dongle"], node.Status.Allocatable["example.com/dongle"]
	if c.String() != "4" || a.String() != "4" {
		t.Fatalf("example.com/dongle after the agent's status updates: capacity %q allocatable %q", c.String(), a.String())
	}
	if pods := node.Status.Capacity[v1.ResourcePods]; pods.Value() != int64(e.cfg.Kubelet.MaxPods) {
		t.Fatalf("the agent's own capacity: pods %s", pods.String())
	}
}
