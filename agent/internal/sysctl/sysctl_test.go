package sysctl

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func podWith(hostNet, hostIPC bool, names ...string) *v1.Pod {
	pod := &v1.Pod{Spec: v1.PodSpec{HostNetwork: hostNet, HostIPC: hostIPC, SecurityContext: &v1.PodSecurityContext{}}}
	for _, n := range names {
		pod.Spec.SecurityContext.Sysctls = append(pod.Spec.SecurityContext.Sysctls, v1.Sysctl{Name: n, Value: "1"})
	}
	return pod
}

func TestAdmit(t *testing.T) {
	cases := []struct {
		name    string
		unsafe  []string
		pod     *v1.Pod
		wantMsg string // "" admits
	}{
		{name: "no security context", pod: &v1.Pod{}},
		{name: "no sysctls", pod: podWith(false, false)},
		{name: "safe ones", pod: podWith(false, false, "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_rmem", "net.ipv4.tcp_keepalive_probes")},
		{name: "safe in slash form", pod: podWith(false, false, "net/ipv4/ip_unprivileged_port_start")},
		{name: "unsafe", pod: podWith(false, false, "kernel.msgmax"),
			wantMsg: `forbidden sysctl: "kernel.msgmax" not allowlisted`},
		{name: "unsafe after a safe one", pod: podWith(false, false, "net.ipv4.tcp_syncookies", "net.core.somaxconn"),
			wantMsg: `forbidden sysctl: "net.core.somaxconn" not allowlisted`},
		{name: "not namespaced", pod: podWith(false, false, "kernel.panic"),
			wantMsg: `forbidden sysctl: "kernel.panic" not allowlisted`},
		{name: "unsafe allowed by name", unsafe: []string{"kernel.msgmax"}, pod: podWith(false, false, "kernel.msgmax")},
		{name: "unsafe allowed by pattern", unsafe: []string{"kernel.msg*", "net.core.*"}, pod: podWith(false, false, "kernel.msgmnb", "net.core.somaxconn")},
		{name: "pattern does not reach further", unsafe: []string{"net.core.*"}, pod: podWith(false, false, "net.ipv4.ip_forward"),
			wantMsg: `forbidden sysctl: "net.ipv4.ip_forward" not allowlisted`},
		{name: "safe net sysctl with hostNetwork", pod: podWith(true, false, "net.ipv4.ip_local_port_range"),
			wantMsg: `forbidden sysctl: "net.ipv4.ip_local_port_range" not allowed with host net enabled`},
		{name: "allowed net pattern with hostNetwork", unsafe: []string{"net.*"}, pod: podWith(true, false, "net.ipv4.ip_forward"),
			wantMsg: `forbidden sysctl: "net.ipv4.ip_forward" not allowed with host net enabled`},
		{name: "safe IPC sysctl with hostIPC", pod: podWith(false, true, "kernel.shm_rmid_forced"),
			wantMsg: `forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host ipc enabled`},
		{name: "net sysctl with hostIPC", pod: podWith(false, true, "net.ipv4.tcp_syncookies")},
		{name: "IPC sysctl with hostNetwork", pod: podWith(true, false, "kernel.shm_rmid_forced")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, err := New(c.unsafe)
			if err != nil {
				t.Fatal(err)
			}
			err = w.Admit(c.pod)
			if c.wantMsg == "" {
				if err != nil {
					t.Fatalf("rejected: %v", err)
				}
				return
			}
			var fe *ForbiddenError
			if !errors.As(err, &fe) || fe.Message != c.wantMsg {
				t.Fatalf("got %v, want %q", err, c.wantMsg)
			}
		})
	}
}

func TestNewRefusesBadPatterns(t *testing.T) {
	for _, p := range []string{"*", "kernel.panic", "kernel.*", "vm.swappiness", "Net.core.somaxconn", "net..x", "net.core.*.x", ""} {
		t.Run(p, func(t *testing.T) {
			if _, err := New([]string{p}); !errors.Is(err, ErrInvalidPattern) {
				t.Fatalf("New(%q): %v, want ErrInvalidPattern", p, err)
			}
		})
	}
}
