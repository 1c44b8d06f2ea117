package kuberuntime

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// maxFQDNLen is what the kernel's nodename holds (64 characters and the NUL), the kubelet's bound
// on a pod's FQDN hostname.
const maxFQDNLen = 64

// sandboxHostname is the hostname the sandbox gets: the pod's short hostname, or, when the pod sets
// setHostnameAsFQDN and names a subdomain, its FQDN <hostname>.<subdomain>.<namespace>.svc.<cluster
// domain>. An FQDN the kernel cannot hold keeps the sandbox from being made, with the kubelet's
// message. A hostNetwork pod has the node's hostname and gets none.
func (m *Manager) sandboxHostname(pod *v1.Pod) (string, error) {
	h := podHostname(pod)
	if h == "" || pod.Spec.SetHostnameAsFQDN == nil || !*pod.Spec.SetHostnameAsFQDN {
		return h, nil
	}
	domain := m.podHostDomain(pod)
	if domain == "" {
		return h, nil
	}
	fqdn := h + "." + domain
	if len(fqdn) > maxFQDNLen {
		return "", fmt.Errorf("failed to construct FQDN from pod hostname and cluster domain, FQDN %s is too long (%d characters is the max, %d characters requested)",
			fqdn, maxFQDNLen, len(fqdn))
	}
	return fqdn, nil
}
