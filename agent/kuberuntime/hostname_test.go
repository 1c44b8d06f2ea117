package kuberuntime

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestSandboxHostname(t *testing.T) {
	yes, no := true, false
	// The namespace pads the FQDN to exactly 64 characters: 6+1+3+1+ns+1+3+1+13.
	ns64 := strings.Repeat("n", 64-6-1-3-1-1-3-1-13)
	cases := []struct {
		name          string
		hostname, sub string
		ns            string
		fqdn          *bool
		hostNetwork   bool
		clusterDomain string
		want          string
		wantErr       string
	}{
		{name: "pod name", want: "web"},
		{name: "spec.hostname", hostname: "host-1", sub: "sub", want: "host-1"},
		{name: "FQDN", hostname: "host-1", sub: "sub", fqdn: &yes, want: "host-1.sub.default.svc.cluster.local"},
		{name: "FQDN of the pod name", sub: "sub", fqdn: &yes, want: "web.sub.default.svc.cluster.local"},
		{name: "FQDN false", hostname: "host-1", sub: "sub", fqdn: &no, want: "host-1"},
		{name: "FQDN without subdomain is the short name", hostname: "host-1", fqdn: &yes, want: "host-1"},
		{name: "no cluster domain", hostname: "host-1", sub: "sub", fqdn: &yes, clusterDomain: "-", want: "host-1.sub.default.svc."},
		{name: "host network has the node's", hostname: "host-1", sub: "sub", fqdn: &yes, hostNetwork: true, want: ""},
		{name: "64 characters fit", hostname: "host-1", sub: "sub", ns: ns64, fqdn: &yes,
			want: "host-1.sub." + ns64 + ".svc.cluster.local"},
		{name: "65 characters do not", hostname: "host-1", sub: "sub", ns: ns64 + "n", fqdn: &yes,
			wantErr: "failed to construct FQDN from pod hostname and cluster domain, FQDN host-1.sub." + ns64 +
				"n.svc.cluster.local is too long (64 characters is the max, 65 characters requested)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			switch tc.clusterDomain {
			case "-":
				f.m.DNS.ClusterDomain = ""
			case "":
			default:
				f.m.DNS.ClusterDomain = tc.clusterDomain
			}
			pod := testPod(v1.RestartPolicyAlways, nil, "a")
			pod.Spec.Hostname, pod.Spec.Subdomain, pod.Spec.SetHostnameAsFQDN = tc.hostname, tc.sub, tc.fqdn
			pod.Spec.HostNetwork = tc.hostNetwork
			if tc.ns != "" {
				pod.Namespace = tc.ns
			}
			cfg, err := f.m.generatePodSandboxConfig(context.Background(), pod, 0)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("err %v\nwant %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Hostname != tc.want {
				t.Fatalf("hostname %q, want %q", cfg.Hostname, tc.want)
			}
		})
	}
}

// The sandbox is not made with a hostname the kernel would refuse.
func TestSandboxNotMadeWithTooLongFQDN(t *testing.T) {
	f := newFixture(t)
	f.cri.AddImage("busybox")
	yes := true
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.Hostname, pod.Spec.Subdomain, pod.Spec.SetHostnameAsFQDN = strings.Repeat("h", 40), "subdomain", &yes
	err := f.sync(pod)
	if err == nil || !strings.Contains(err.Error(), "is too long (64 characters is the max, 76 characters requested)") {
		t.Fatalf("sync: %v", err)
	}
	if got := f.cri.Calls(); len(got) != 0 {
		t.Fatalf("calls %q", got)
	}
}
