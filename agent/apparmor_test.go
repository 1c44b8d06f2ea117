package agent

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/internal/apparmor"
	"github.com/nodelet/nodelet/test/harness/kubefake"
)

// TestAppArmorLocalhostPod: a pod asking for the AppArmor profile localhost/x. Where the kernel
// does not enforce AppArmor (this test's usual host) it is rejected as the kubelet rejects it:
// Failed, reason AppArmor, and a Warning event saying so; no sandbox is made. Where it does, the
// profile reaches the runtime with the container.
func TestAppArmorLocalhostPod(t *testing.T) {
	h := newHarness(t)
	grace := int64(1)
	x := "x"
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "confined", Namespace: "default", UID: "apparmor-uid"},
		Spec: v1.PodSpec{NodeName: "node1", RestartPolicy: v1.RestartPolicyAlways, TerminationGracePeriodSeconds: &grace,
			SecurityContext: &v1.PodSecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: &x}},
			Containers:      []v1.Container{{Name: "c", Image: "busybox:1", ImagePullPolicy: v1.PullIfNotPresent}}},
		Status: v1.PodStatus{Phase: v1.PodPending}}
	client := fake.NewSimpleClientset(pod)
	h.start(Deps{KubeClient: kubefake.Wrap(client)})
	ctx := context.Background()

	if apparmor.Enabled() {
		h.eventually("container running", func() bool { return len(h.running()) == 1 })
		p := h.cri.ContainerConfig(h.running()[0].Id).GetLinux().GetSecurityContext()
		if p.GetApparmor().GetProfileType() != runtimeapi.SecurityProfile_Localhost || p.GetApparmor().GetLocalhostRef() != "x" ||
			p.GetApparmorProfile() != "localhost/x" {
			t.Fatalf("apparmor sent: %v %q", p.GetApparmor(), p.GetApparmorProfile())
		}
		return
	}
	const msg = "Cannot enforce AppArmor: AppArmor is not enabled on the host"
	h.eventually("pod rejected", func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "confined", metav1.GetOptions{})
		return err == nil && p.Status.Phase == v1.PodFailed
	})
	p, _ := client.CoreV1().Pods("default").Get(ctx, "confined", metav1.GetOptions{})
	if p.Status.Reason != "AppArmor" || p.Status.Message != "Pod was rejected: "+msg {
		t.Fatalf("status reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	h.eventually("AppArmor event", func() bool {
		evs, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == "confined" && e.Reason == "AppArmor" && e.Type == v1.EventTypeWarning && e.Message == msg {
				return true
			}
		}
		return false
	})
	if got := h.cri.CallsWithPrefix("RunPodSandbox"); len(got) != 0 {
		t.Fatalf("a sandbox was made for a rejected pod: %q", got)
	}
}
