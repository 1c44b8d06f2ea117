package kuberuntime

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DNSConfigurer makes a pod's resolv.conf settings. It holds the host's resolv.conf as read once at
// start, so a sync never reads files or asks a resolver.
type DNSConfigurer struct {
	ClusterDNS    []string
	ClusterDomain string
	host          resolvConf
}

// resolvConf is the host's resolver settings.
type resolvConf struct {
	Servers, Searches, Options []string
}

// NewDNSConfigurer reads resolvConf (the kubelet's --resolv-conf; "" means none).
func NewDNSConfigurer(clusterDNS []string, clusterDomain, resolvConf string) (DNSConfigurer, error) {
	d := DNSConfigurer{ClusterDNS: clusterDNS, ClusterDomain: clusterDomain}
	if resolvConf == "" {
		return d, nil
	}
	b, err := os.ReadFile(resolvConf)
	if err != nil {
		return d, fmt.Errorf("read resolv.conf: %w", err)
	}
	d.host = parseResolvConf(b)
	return d, nil
}

func parseResolvConf(b []byte) resolvConf {
	var c resolvConf
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") || strings.HasPrefix(f[0], ";") {
			continue
		}
		switch f[0] {
		case "nameserver":
			c.Servers = append(c.Servers, f[1])
		case "search", "domain":
			c.Searches = f[1:]
		case "options":
			c.Options = append(c.Options, f[1:]...)
		}
	}
	return c
}

// PodDNS returns the DNS config for the pod's sandbox per its dnsPolicy.
func (d DNSConfigurer) PodDNS(pod *v1.Pod) *runtimeapi.DNSConfig {
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = v1.DNSClusterFirst
	}
	if policy == v1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = v1.DNSDefault
	}
	if (policy == v1.DNSClusterFirst || policy == v1.DNSClusterFirstWithHostNet) && len(d.ClusterDNS) == 0 {
		policy = v1.DNSDefault
	}
	cfg := &runtimeapi.DNSConfig{}
	switch policy {
	case v1.DNSDefault:
		cfg.Servers = append(cfg.Servers, d.host.Servers...)
		cfg.Searches = append(cfg.Searches, d.host.Searches...)
		cfg.Options = append(cfg.Options, d.host.Options...)
	case v1.DNSClusterFirst, v1.DNSClusterFirstWithHostNet:
		cfg.Servers = append(cfg.Servers, d.ClusterDNS...)
		searches := d.host.Searches
		if d.ClusterDomain != "" {
			searches = append([]string{pod.Namespace + ".svc." + d.ClusterDomain, "svc." + d.ClusterDomain, d.ClusterDomain}, searches...)
		}
		cfg.Searches = withoutDuplicates(searches)
		cfg.Options = []string{"ndots:5"}
	}
	if pc := pod.Spec.DNSConfig; pc != nil {
		cfg.Servers = withoutDuplicates(append(cfg.Servers, pc.Nameservers...))
		cfg.Searches = withoutDuplicates(append(cfg.Searches, pc.Searches...))
		cfg.Options = mergeOptions(cfg.Options, pc.Options)
	}
	return cfg
}

// podDNS is the sandbox's DNS config, cut to what resolvers take; each cut is a DNSConfigForming
// warning on the pod, as the kubelet's.
func (m *Manager) podDNS(pod *v1.Pod) *runtimeapi.DNSConfig {
	cfg := m.DNS.PodDNS(pod)
	for _, warning := range fitDNSLimits(cfg) {
		m.Recorder.Event(pod, v1.EventTypeWarning, "DNSConfigForming", warning)
	}
	return cfg
}

// The API server's limits on a pod's own dnsConfig, which the kubelet also applies to the
// config it composes with the node's resolver and the cluster's search domains.
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
	maxDNSSearchLength    = 253 // a longer search path makes some resolvers (glibc 2.28) abort
)

// fitDNSLimits keeps the first 3 nameservers and as many search paths as fit, and says what it cut.
func fitDNSLimits(cfg *runtimeapi.DNSConfig) []string {
	var warnings []string
	if len(cfg.Servers) > maxDNSNameservers {
		cfg.Servers = cfg.Servers[:maxDNSNameservers]
		warnings = append(warnings, "Nameserver limits were exceeded, some nameservers have been omitted, "+
			"the applied nameserver line is: "+strings.Join(cfg.Servers, " "))
	}
	cut := false
	if len(cfg.Searches) > maxDNSSearchPaths {
		cfg.Searches, cut = cfg.Searches[:maxDNSSearchPaths], true
	}
	kept := cfg.Searches[:0]
	for _, s := range cfg.Searches {
		if len(s) > maxDNSSearchLength {
			cut = true
			continue
		}
		kept = append(kept, s)
	}
	cfg.Searches = kept
	for len(strings.Join(cfg.Searches, " ")) > maxDNSSearchListChars {
		cfg.Searches, cut = cfg.Searches[:len(cfg.Searches)-1], true
	}
	if cut {
		warnings = append(warnings, "Search Line limits were exceeded, some search paths have been omitted, "+
			"the applied search line is: "+strings.Join(cfg.Searches, " "))
	}
	return warnings
}

func withoutDuplicates(list []string) []string {
	seen := make(map[string]bool, len(list))
	out := list[:0:0]
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// mergeOptions adds the pod's resolver options to the policy's; an option the pod names again
// takes the pod's value, in the place it had.
func mergeOptions(base []string, pod []v1.PodDNSConfigOption) []string {
	out := make([]string, 0, len(base)+len(pod))
	at := map[string]int{}
	put := func(name, opt string) {
		if i, ok := at[name]; ok {
			out[i] = opt
			return
		}
		at[name] = len(out)
		out = append(out, opt)
	}
	for _, o := range base {
		name, _, _ := strings.Cut(o, ":")
		put(name, o)
	}
	for _, o := range pod {
		opt := o.Name
		if o.Value != nil && *o.Value != "" {
			opt += ":" + *o.Value
		}
		put(o.Name, opt)
	}
	return out
}
