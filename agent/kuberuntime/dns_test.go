package kuberuntime

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

type dnsEvents struct{ got []string }

func (r *dnsEvents) Event(_ runtime.Object, typ, reason, msg string) {
	r.got = append(r.got, typ+" "+reason+" "+msg)
}
func (r *dnsEvents) Eventf(o runtime.Object, typ, reason, f string, a ...any) {
	r.Event(o, typ, reason, fmt.Sprintf(f, a...))
}
func (r *dnsEvents) AnnotatedEventf(o runtime.Object, _ map[string]string, typ, reason, f string, a ...any) {
	r.Eventf(o, typ, reason, f, a...)
}

// As the kubelet: the composed config keeps 3 nameservers and the search paths that fit (32, none
// longer than 253 characters, 2048 in all); each cut is a DNSConfigForming warning. Duplicates
// are left out and the pod's options replace the policy's of the same name.
func TestPodDNSFitsResolverLimits(t *testing.T) {
	ev := &dnsEvents{}
	m := &Manager{Deps: Deps{Recorder: ev, DNS: DNSConfigurer{ClusterDNS: []string{"10.96.0.10"}, ClusterDomain: "cluster.local",
		host: resolvConf{Searches: []string{"example.org", "cluster.local"}}}}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	pod.Spec.DNSConfig = &v1.PodDNSConfig{
		Nameservers: []string{"10.96.0.10", "192.0.2.1", "192.0.2.2", "192.0.2.3"},
		Searches:    []string{"a.example", "a.example", strings.Repeat("x", 254)},
		Options:     []v1.PodDNSConfigOption{{Name: "ndots", Value: ptrTo("2")}, {Name: "edns0"}},
	}
	cfg := m.podDNS(pod)
	if want := []string{"10.96.0.10", "192.0.2.1", "192.0.2.2"}; !slices.Equal(cfg.Servers, want) {
		t.Errorf("servers %v, want %v", cfg.Servers, want)
	}
	wantSearch := []string{"ns.svc.cluster.local", "svc.cluster.local", "cluster.local", "example.org", "a.example"}
	if !slices.Equal(cfg.Searches, wantSearch) {
		t.Errorf("searches %v, want %v", cfg.Searches, wantSearch)
	}
	if want := []string{"ndots:2", "edns0"}; !slices.Equal(cfg.Options, want) {
		t.Errorf("options %v, want %v", cfg.Options, want)
	}
	want := []string{
		"Warning DNSConfigForming Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 10.96.0.10 192.0.2.1 192.0.2.2",
		"Warning DNSConfigForming Search Line limits were exceeded, some search paths have been omitted, the applied search line is: " + strings.Join(wantSearch, " "),
	}
	if !slices.Equal(ev.got, want) {
		t.Errorf("events\n%q\nwant\n%q", ev.got, want)
	}

	// More than 32 paths, and more than 2048 characters.
	ev.got = nil
	pod.Spec.DNSPolicy = v1.DNSNone
	pod.Spec.DNSConfig = &v1.PodDNSConfig{}
	for i := range 40 {
		pod.Spec.DNSConfig.Searches = append(pod.Spec.DNSConfig.Searches, fmt.Sprintf("d%d.example", i))
	}
	if cfg := m.podDNS(pod); len(cfg.Searches) != 32 || cfg.Searches[31] != "d31.example" || len(ev.got) != 1 {
		t.Errorf("searches %v, events %q", cfg.Searches, ev.got)
	}
	ev.got = nil
	pod.Spec.DNSConfig.Searches = nil
	for i := range 10 {
		pod.Spec.DNSConfig.Searches = append(pod.Spec.DNSConfig.Searches, fmt.Sprintf("%d%s", i, strings.Repeat("y", 249)))
	}
	if cfg := m.podDNS(pod); len(cfg.Searches) != 8 || len(strings.Join(cfg.Searches, " ")) > 2048 || len(ev.got) != 1 {
		t.Errorf("%d searches, %d characters, events %q", len(cfg.Searches), len(strings.Join(cfg.Searches, " ")), ev.got)
	}

	// Within the limits: nothing cut, nothing said.
	ev.got = nil
	pod.Spec.DNSConfig = &v1.PodDNSConfig{Nameservers: []string{"192.0.2.1"}, Searches: []string{"a.example"}}
	if cfg := m.podDNS(pod); len(cfg.Servers) != 1 || len(cfg.Searches) != 1 || len(ev.got) != 0 {
		t.Errorf("config %v, events %q", cfg, ev.got)
	}
}

func ptrTo[T any](v T) *T { return &v }
