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
		if d.ClusterDomain != "" {
			cfg.Searches = []string{pod.Namespace + ".svc." + d.ClusterDomain, "svc." + d.ClusterDomain, d.ClusterDomain}
		}
		cfg.Searches = append(cfg.Searches, d.host.Searches...)
		cfg.Options = []string{"ndots:5"}
	}
	if pc := pod.Spec.DNSConfig; pc != nil {
		cfg.Servers = append(cfg.Servers, pc.Nameservers...)
		cfg.Searches = append(cfg.Searches, pc.Searches...)
		for _, o := range pc.Options {
			if o.Value != nil {
				cfg.Options = append(cfg.Options, o.Name+":"+*o.Value)
			} else {
				cfg.Options = append(cfg.Options, o.Name)
			}
		}
	}
	return cfg
}
