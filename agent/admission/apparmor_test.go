package admission

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAppArmorAdmit(t *testing.T) {
	name := func(s string) *string { return &s }
	pod := func(mutate func(*v1.Pod)) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: map[string]string{}},
			Spec: v1.PodSpec{SecurityContext: &v1.PodSecurityContext{},
				InitContainers: []v1.Container{{Name: "init"}}, Containers: []v1.Container{{Name: "app"}}}}
		mutate(p)
		return p
	}
	localhostPod := pod(func(p *v1.Pod) {
		p.Spec.SecurityContext.AppArmorProfile = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: name("x")}
	})
	const notEnabled = "Cannot enforce AppArmor: AppArmor is not enabled on the host"
	cases := []struct {
		name    string
		enabled bool
		pod     *v1.Pod
		wantMsg string // "" admits
	}{
		{name: "nothing asked", pod: pod(func(*v1.Pod) {})},
		{name: "unconfined everywhere", pod: pod(func(p *v1.Pod) {
			p.Spec.SecurityContext.AppArmorProfile = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeUnconfined}
			p.Annotations[v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+"app"] = "unconfined"
		})},
		{name: "pod localhost", pod: localhostPod, wantMsg: notEnabled},
		{name: "pod localhost where enforced", enabled: true, pod: localhostPod},
		{name: "init container runtime default", pod: pod(func(p *v1.Pod) {
			p.Spec.InitContainers[0].SecurityContext = &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}}
		}), wantMsg: notEnabled},
		{name: "ephemeral container localhost", pod: pod(func(p *v1.Pod) {
			p.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "dbg",
				SecurityContext: &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: name("y")}}}}}
		}), wantMsg: notEnabled},
		{name: "deprecated annotation", pod: pod(func(p *v1.Pod) {
			p.Annotations[v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+"app"] = "localhost/x"
		}), wantMsg: notEnabled},
		{name: "empty localhost name where enforced", enabled: true, pod: pod(func(p *v1.Pod) {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{AppArmorProfile: &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeLocalhost, LocalhostProfile: name(" ")}}
		}), wantMsg: `Cannot enforce AppArmor: invalid empty AppArmor profile name: " "`},
		{name: "empty annotation name where enforced", enabled: true, pod: pod(func(p *v1.Pod) {
			p.Annotations[v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+"app"] = "localhost/"
		}), wantMsg: `Cannot enforce AppArmor: invalid empty AppArmor profile name: ""`},
		{name: "running pods are not checked again", pod: pod(func(p *v1.Pod) {
			p.Spec.SecurityContext.AppArmorProfile = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}
			p.Status.Phase = v1.PodRunning
		})},
		{name: "pending pods are", pod: pod(func(p *v1.Pod) {
			p.Spec.SecurityContext.AppArmorProfile = &v1.AppArmorProfile{Type: v1.AppArmorProfileTypeRuntimeDefault}
			p.Status.Phase = v1.PodPending
		}), wantMsg: notEnabled},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := NewAppArmor(func() bool { return c.enabled }).Admit(c.pod)
			if c.wantMsg == "" {
				if !r.Admit {
					t.Fatalf("refused: %+v", r)
				}
				return
			}
			if r.Admit || r.Reason != "AppArmor" || r.Message != c.wantMsg {
				t.Fatalf("got %+v, want reason AppArmor, message %q", r, c.wantMsg)
			}
		})
	}
}
