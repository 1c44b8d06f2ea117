package kuberuntime

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/internal/podpath"
	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/internal/regularfile"
)

const etcHostsPath = "/etc/hosts"

// nodeHostsFile is the node's hosts file, which hostNetwork pods see; a variable for tests.
var nodeHostsFile = "/etc/hosts"

// maxNodeHostsBytes bounds what is read of the node's hosts file.
const maxNodeHostsBytes = 1 << 20

// The headers the kubelet writes; tools and the conformance suite look for them.
const (
	managedHostsHeader            = "# Kubernetes-managed hosts file.\n"
	managedHostsHeaderHostNetwork = "# Kubernetes-managed hosts file (host network).\n"
)

// etcHostsMount writes the pod's hosts file and mounts it at /etc/hosts, as the kubelet does, so
// that pods see the same file whatever the runtime (containerd would otherwise show the image's).
// Nothing is mounted before the pod has an IP (unless it uses the host's network), nor over a
// volume the container itself mounts at /etc/hosts.
func (m *Manager) etcHostsMount(pod *v1.Pod, c *v1.Container, podIPs []string) (*runtimeapi.Mount, error) {
	if m.RootDir == "" || (len(podIPs) == 0 && !pod.Spec.HostNetwork) {
		return nil, nil
	}
	for _, vm := range c.VolumeMounts {
		if filepath.Clean(vm.MountPath) == etcHostsPath {
			return nil, nil
		}
	}
	var content []byte
	if pod.Spec.HostNetwork {
		node, err := regularfile.Read(nodeHostsFile, maxNodeHostsBytes)
		if err != nil {
			return nil, fmt.Errorf("hosts file: %w", err)
		}
		content = nodeHostsContent(node, pod.Spec.HostAliases)
	} else {
		content = managedHostsContent(podIPs, podHostname(pod), m.podHostDomain(pod), pod.Spec.HostAliases)
	}
	path, err := podpath.EtcHostsFile(m.RootDir, pod.UID)
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(path, content, 0o644); err != nil {
		return nil, fmt.Errorf("hosts file: %w", err)
	}
	return &runtimeapi.Mount{ContainerPath: etcHostsPath, HostPath: path}, nil
}

// podHostDomain is <subdomain>.<namespace>.svc.<cluster domain> when the pod names a subdomain.
// Without a cluster domain it ends in "svc.", as the kubelet's does.
func (m *Manager) podHostDomain(pod *v1.Pod) string {
	if pod.Spec.Subdomain == "" {
		return ""
	}
	return pod.Spec.Subdomain + "." + pod.Namespace + ".svc." + m.DNS.ClusterDomain
}

// hostsField: a value that is one field of a hosts line. The API server validates IPs and names
// already; this keeps anything that slipped past from adding a line or a comment.
func hostsField(s string) bool {
	return s != "" && !strings.ContainsAny(s, " \t\r\n\v\f\x00#")
}

func managedHostsContent(podIPs []string, hostname, domain string, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeader)
	b.WriteString("127.0.0.1\tlocalhost\n")
	b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
	b.WriteString("fe00::0\tip6-localnet\n")
	b.WriteString("fe00::0\tip6-mcastprefix\n")
	b.WriteString("fe00::1\tip6-allnodes\n")
	b.WriteString("fe00::2\tip6-allrouters\n")
	if hostsField(hostname) {
		for _, ip := range podIPs {
			if !hostsField(ip) {
				continue
			}
			if hostsField(domain) {
				fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
			} else {
				fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
			}
		}
	}
	b.Write(hostAliasEntries(aliases))
	return b.Bytes()
}

func nodeHostsContent(node []byte, aliases []v1.HostAlias) []byte {
	var b bytes.Buffer
	b.WriteString(managedHostsHeaderHostNetwork)
	b.Write(node)
	if len(node) > 0 && node[len(node)-1] != '\n' && len(aliases) > 0 {
		b.WriteByte('\n')
	}
	b.Write(hostAliasEntries(aliases))
	return b.Bytes()
}

// hostAliasEntries writes one line per alias: its IP and its host names.
func hostAliasEntries(aliases []v1.HostAlias) []byte {
	if len(aliases) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteString("\n# Entries added by HostAliases.\n")
	for _, a := range aliases {
		if !hostsField(a.IP) {
			continue
		}
		names := make([]string, 0, len(a.Hostnames))
		for _, h := range a.Hostnames {
			if hostsField(h) {
				names = append(names, h)
			}
		}
		fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(names, "\t"))
	}
	return b.Bytes()
}

// writeFileAtomic replaces path with data (temp file, fsync, rename), so a container starting at
// the same time never sees half a file. An unchanged file is left alone.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	// Containers may write to the mounted file: compare no more than what would be written.
	if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm() == mode && fi.Size() == int64(len(data)) {
		if old, err := regularfile.ReadTail(path, int64(len(data))); err == nil && bytes.Equal(old, data) {
			return nil
		}
	}
	return atomicfile.Write(path, data, mode)
}
