package engine

import (
	"os"
	"path/filepath"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/store"
)

// The pod files containers bind-mount as /etc/hostname, /etc/hosts and /etc/resolv.conf.
const (
	HostnameFile = "hostname"
	HostsFile    = "hosts"
	ResolvFile   = "resolv.conf"
)

// The host's files, used when the pod asks for no DNS config or uses the host network.
var (
	hostResolvConf = "/etc/resolv.conf"
	hostHosts      = "/etc/hosts"
)

const podHosts = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\nfe00::0\tip6-localnet\nff00::0\tip6-mcastprefix\nff02::1\tip6-allnodes\nff02::2\tip6-allrouters\n"

// sandboxHostname is the pod's hostname: the host's with the host network (the pod shares its
// UTS namespace then), else what the pod asks for, else a short form of its ID.
func sandboxHostname(cfg *runtimeapi.PodSandboxConfig, id string, hostNet bool) (string, error) {
	if hostNet {
		return os.Hostname()
	}
	if cfg.Hostname != "" {
		return cfg.Hostname, nil
	}
	return id[:12], nil
}

// writePodFiles writes the pod's hostname, hosts and resolv.conf into sb.Dir.
func writePodFiles(sb *store.Sandbox, hostname string, hostNet bool) error {
	hosts := []byte(podHosts)
	if hostNet {
		b, err := os.ReadFile(hostHosts)
		if err != nil && !os.IsNotExist(err) {
			return err
		}
		hosts = b
	}
	resolv, err := resolvConf(sb.Config.DnsConfig)
	if err != nil {
		return err
	}
	// Plain writes, no fsync: the files are written while the record says Creating, and a
	// sandbox cut short there is undone on restart rather than trusted.
	for name, data := range map[string][]byte{HostnameFile: []byte(hostname + "\n"), HostsFile: hosts, ResolvFile: resolv} {
		if err := os.WriteFile(filepath.Join(sb.Dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// resolvConf renders the pod's DNS config (validated: each search and option is one word), or
// copies the host's when the pod gives none, as the kubelet's "Default" DNS policy expects.
func resolvConf(d *runtimeapi.DNSConfig) ([]byte, error) {
	if len(d.GetServers()) == 0 && len(d.GetSearches()) == 0 && len(d.GetOptions()) == 0 {
		b, err := os.ReadFile(hostResolvConf)
		if os.IsNotExist(err) {
			return nil, nil
		}
		return b, err
	}
	var b strings.Builder
	if len(d.Searches) > 0 {
		b.WriteString("search " + strings.Join(d.Searches, " ") + "\n")
	}
	for _, s := range d.Servers {
		b.WriteString("nameserver " + s + "\n")
	}
	if len(d.Options) > 0 {
		b.WriteString("options " + strings.Join(d.Options, " ") + "\n")
	}
	return []byte(b.String()), nil
}
