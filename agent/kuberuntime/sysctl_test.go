package kuberuntime

import (
	"context"
	"maps"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// Sysctls written with slashes, as the API allows, reach the runtime in the dotted form it takes,
// the dots of an element (an interface eno2.100) turned to slashes, as the kubelet sends them.
func TestSandboxSysctlsAreDotted(t *testing.T) {
	f := newFixture(t)
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{
		{Name: "kernel/shm_rmid_forced", Value: "1"},
		{Name: "net/ipv4/conf/eno2.100/rp_filter", Value: "2"},
		{Name: "net.ipv4.ip_local_port_range", Value: "1024 65000"},
	}}
	cfg, err := f.m.generatePodSandboxConfig(context.Background(), pod, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"kernel.shm_rmid_forced": "1", "net.ipv4.conf.eno2/100.rp_filter": "2",
		"net.ipv4.ip_local_port_range": "1024 65000"}
	if got := cfg.Linux.Sysctls; !maps.Equal(got, want) {
		t.Fatalf("sysctls %v, want %v", got, want)
	}
}
