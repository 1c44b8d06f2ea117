package cni

import (
	"errors"
	"math"
	"reflect"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

func TestCapabilityArgs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pod     PodNetwork
		want    map[string]any
		wantErr error
	}{
		{name: "nothing", pod: PodNetwork{}, want: map[string]any{}},
		{
			name: "port mappings: tcp, udp, host IP; no hostPort means no rule",
			pod: PodNetwork{PortMappings: []*runtimeapi.PortMapping{
				{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: 8080},
				{Protocol: runtimeapi.Protocol_UDP, ContainerPort: 53, HostPort: 5353, HostIp: "127.0.0.1"},
				{Protocol: runtimeapi.Protocol_SCTP, ContainerPort: 9, HostPort: 9},
				{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 443},
				nil,
			}},
			want: map[string]any{"portMappings": []portMapping{
				{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"},
				{HostPort: 5353, ContainerPort: 53, Protocol: "udp", HostIP: "127.0.0.1"},
				{HostPort: 9, ContainerPort: 9, Protocol: "sctp"},
			}},
		},
		{
			name: "bandwidth annotations",
			pod: PodNetwork{Annotations: map[string]string{
				IngressBandwidthAnnotation: "10M", EgressBandwidthAnnotation: "1G", "other": "x"}},
			want: map[string]any{"bandwidth": map[string]uint64{
				"ingressRate": 10_000_000, "ingressBurst": math.MaxUint32,
				"egressRate": 1_000_000_000, "egressBurst": math.MaxUint32}},
		},
		{name: "bandwidth not a quantity", pod: PodNetwork{Annotations: map[string]string{IngressBandwidthAnnotation: "fast"}}, wantErr: errdefs.ErrInvalidArgument},
		{name: "bandwidth too small", pod: PodNetwork{Annotations: map[string]string{EgressBandwidthAnnotation: "10"}}, wantErr: errdefs.ErrInvalidArgument},
		{name: "bandwidth too large", pod: PodNetwork{Annotations: map[string]string{EgressBandwidthAnnotation: "2P"}}, wantErr: errdefs.ErrInvalidArgument},
		{
			name: "dns and cgroup",
			pod: PodNetwork{CgroupParent: "/kubepods/pod1", DNS: &runtimeapi.DNSConfig{
				Servers: []string{"10.0.0.10"}, Searches: []string{"ns.svc.cluster.local"}, Options: []string{"ndots:5"}}},
			want: map[string]any{
				"dns":        map[string][]string{"servers": {"10.0.0.10"}, "searches": {"ns.svc.cluster.local"}, "options": {"ndots:5"}},
				"cgroupPath": "/kubepods/pod1",
			},
		},
		{name: "empty dns is left out", pod: PodNetwork{DNS: &runtimeapi.DNSConfig{}}, want: map[string]any{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := capabilityArgs(tc.pod)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %#v\nwant %#v", got, tc.want)
			}
		})
	}
}

func TestPodArgsAndIDs(t *testing.T) {
	p := PodNetwork{Namespace: "ns", Name: "web", UID: "u-1", SandboxID: "abc123"}
	want := [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "ns"}, {"K8S_POD_NAME", "web"},
		{"K8S_POD_INFRA_CONTAINER_ID", "abc123"}, {"K8S_POD_UID", "u-1"}}
	if got := podArgs(p); !reflect.DeepEqual(got, want) {
		t.Fatalf("podArgs = %v", got)
	}
	for _, bad := range []string{"", "../x", "a/b", ".hidden", "x y"} {
		if err := checkPod(PodNetwork{SandboxID: bad}); !errors.Is(err, errdefs.ErrInvalidArgument) {
			t.Errorf("sandbox ID %q accepted: %v", bad, err)
		}
	}
}
