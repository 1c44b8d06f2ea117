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

func TestAdmitChecksSysctls(t *testing.T) {
	withSysctls := func(hostNet bool, names ...string) *v1.Pod {
		p := &v1.Pod{Spec: v1.PodSpec{HostNetwork: hostNet, SecurityContext: &v1.PodSecurityContext{}}}
		for _, n := range names {
			p.Spec.SecurityContext.Sysctls = append(p.Spec.SecurityContext.Sysctls, v1.Sysctl{Name: n, Value: "1"})
		}
		return p
	}
	cases := []struct {
		name    string
		unsafe  []string
		pod     *v1.Pod
		wantMsg string
	}{
		{name: "safe", pod: withSysctls(false, "net.ipv4.ip_local_port_range")},
		{name: "unsafe", pod: withSysctls(false, "kernel.msgmax"), wantMsg: `forbidden sysctl: "kernel.msgmax" not allowlisted`},
		{name: "unsafe allowed", unsafe: []string{"kernel.msg*"}, pod: withSysctls(false, "kernel.msgmax")},
		{name: "net with hostNetwork", unsafe: []string{"net.*"}, pod: withSysctls(true, "net.core.somaxconn"),
			wantMsg: `forbidden sysctl: "net.core.somaxconn" not allowed with host net enabled`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := sysctl.New(c.unsafe)
			if err != nil {
				t.Fatal(err)
			}
			node := admission.LocalNode("n1", nil, nil)
			capacity := func() v1.ResourceList { return nodestatus.Capacity(10, t.TempDir()) }
			a := &Agent{cfg: agentconfig.Config{MaxPods: 10}, sysctls: w, admission: admission.New(admission.AnyWay(nil, node), capacity)}
			err = a.admit(c.pod, nil)
			if c.wantMsg == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			var ae *syncloop.AdmitError
			if !errors.As(err, &ae) || ae.Reason != "SysctlForbidden" || ae.Message != c.wantMsg {
				t.Fatalf("got %v, want SysctlForbidden %q", err, c.wantMsg)
			}
		})
	}
}
