package podvalidation

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestHostUsersFalse: the API server's refusals beside spec.hostUsers: false, with its field paths
// and messages; hostUsers false alone, or true with host namespaces, is accepted.
func TestHostUsersFalse(t *testing.T) {
	f, tr := false, true
	for _, tt := range []struct {
		name   string
		mutate func(p *v1.Pod)
		want   string // "" accepted
	}{
		{"alone", func(p *v1.Pod) {}, ""},
		{"hostNetwork", func(p *v1.Pod) { p.Spec.HostNetwork = true }, "spec.hostNetwork: Forbidden: when `hostUsers` is false"},
		{"hostPID", func(p *v1.Pod) { p.Spec.HostPID = true }, "spec.HostPID: Forbidden: when `hostUsers` is false"},
		{"hostIPC", func(p *v1.Pod) { p.Spec.HostIPC = true }, "spec.HostIPC: Forbidden: when `hostUsers` is false"},
		{"volumeDevices", func(p *v1.Pod) {
			p.Spec.Containers[0].VolumeDevices = []v1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}}
		}, "spec.containers[0].volumeDevices: Forbidden: when `hostUsers` is false"},
		{"init volumeDevices", func(p *v1.Pod) {
			p.Spec.InitContainers[0].VolumeDevices = []v1.VolumeDevice{{Name: "data", DevicePath: "/dev/xvda"}}
		}, "spec.initContainers[0].volumeDevices: Forbidden: when `hostUsers` is false"},
		{"hostUsers true with host namespaces", func(p *v1.Pod) {
			p.Spec.HostUsers = &tr
			p.Spec.HostNetwork, p.Spec.HostPID, p.Spec.HostIPC = true, true, true
		}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := goodPod()
			p.Spec.HostUsers = &f
			tt.mutate(p)
			errs := ValidateStaticPod(p)
			if tt.want == "" {
				if len(errs) > 0 {
					t.Fatalf("refused: %v", errs.ToAggregate())
				}
				return
			}
			if len(errs) == 0 {
				t.Fatal("accepted")
			}
			if got := errs.ToAggregate().Error(); !strings.Contains(got, tt.want) {
				t.Fatalf("error %q\ndoes not contain %q", got, tt.want)
			}
		})
	}
}
