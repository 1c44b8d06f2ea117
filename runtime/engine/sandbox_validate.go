package engine

import (
	"fmt"
	"net/netip"
	"path"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// Limits on a sandbox config: generous for real pods, small enough that a hostile request cannot
// make the daemon write megabytes of metadata or a resolv.conf libc will not read.
const (
	maxNameLen        = 253
	maxHostnameLen    = 64 // HOST_NAME_MAX: the kernel's nodename holds 64 and a NUL (a pod's FQDN may use all 64)
	maxMetadataBytes  = 256 << 10
	maxSysctls        = 128
	maxDNSServers     = 3 // glibc reads only MAXNS = 3
	maxDNSSearches    = 32
	maxDNSOptions     = 32
	maxDNSLine        = 2048
	maxPortMappings   = 1024
	maxCgroupParent   = 4096
	maxSysctlValueLen = 4096
)

func invalid(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, errdefs.ErrInvalidArgument)...)
}

// validateSandboxConfig refuses a PodSandboxConfig that could not be run safely. It only reads.
func validateSandboxConfig(cfg *runtimeapi.PodSandboxConfig) error {
	if cfg == nil {
		return invalid("sandbox config is required")
	}
	md := cfg.GetMetadata()
	if md == nil {
		return invalid("sandbox metadata is required")
	}
	for _, f := range []struct{ what, v string }{{"name", md.Name}, {"namespace", md.Namespace}, {"uid", md.Uid}} {
		if err := validName(f.what, f.v); err != nil {
			return err
		}
	}
	if h := cfg.Hostname; h != "" {
		if err := validHostname(h); err != nil {
			return err
		}
	}
	if d := cfg.LogDirectory; d != "" && (!path.IsAbs(d) || hasDotDot(d) || strings.ContainsAny(d, "\x00\n")) {
		return invalid("log directory %q must be an absolute path without '..'", d)
	}
	size := 0
	for _, m := range []map[string]string{cfg.Labels, cfg.Annotations} {
		for k, v := range m {
			if k == "" {
				return invalid("empty label or annotation key")
			}
			size += len(k) + len(v)
		}
	}
	if size > maxMetadataBytes {
		return invalid("labels and annotations take %d bytes, more than %d", size, maxMetadataBytes)
	}
	if len(cfg.PortMappings) > maxPortMappings {
		return invalid("%d port mappings, more than %d", len(cfg.PortMappings), maxPortMappings)
	}
	if err := validDNS(cfg.DnsConfig); err != nil {
		return err
	}
	lx := cfg.GetLinux()
	if p := lx.GetCgroupParent(); p != "" {
		if len(p) > maxCgroupParent || !path.IsAbs(p) || hasDotDot(p) || path.Clean(p) != p || strings.ContainsAny(p, "\x00\n") {
			return invalid("cgroup parent %q must be a clean absolute cgroupfs path (the cgroupfs driver is in use)", p)
		}
	}
	ns := lx.GetSecurityContext().GetNamespaceOptions()
	if m := ns.GetPid(); m == runtimeapi.NamespaceMode_TARGET {
		return invalid("pid namespace mode TARGET is for containers, not sandboxes")
	}
	if err := validUserns(ns); err != nil {
		return err
	}
	for _, m := range []runtimeapi.NamespaceMode{ns.GetNetwork(), ns.GetIpc()} {
		if m != runtimeapi.NamespaceMode_POD && m != runtimeapi.NamespaceMode_NODE {
			return invalid("network and ipc namespace modes must be POD or NODE, not %s", m)
		}
	}
	return validSysctls(lx.GetSysctls(), ns.GetNetwork() == runtimeapi.NamespaceMode_NODE, ns.GetIpc() == runtimeapi.NamespaceMode_NODE)
}

// validName accepts a Kubernetes name, namespace or uid: it becomes part of file names and of the
// reserved sandbox name, so no separators, no "..", no control characters, and not "." alone,
// which names the folder it would be joined to.
func validName(what, v string) error {
	switch {
	case v == "":
		return invalid("sandbox metadata %s is required", what)
	case len(v) > maxNameLen:
		return invalid("sandbox metadata %s is %d bytes, more than %d", what, len(v), maxNameLen)
	case v == ".":
		return invalid("sandbox metadata %s must not be '.'", what)
	case strings.Contains(v, ".."), strings.ContainsAny(v, `/\`):
		return invalid("sandbox metadata %s %q must not contain '/', '\\' or '..'", what, v)
	}
	for _, c := range v {
		if c < 0x21 || c == 0x7f {
			return invalid("sandbox metadata %s %q has a space or control character", what, v)
		}
	}
	return nil
}

func validHostname(h string) error {
	if len(h) > maxHostnameLen {
		return invalid("hostname %q is longer than %d", h, maxHostnameLen)
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.') {
			return invalid("hostname %q: only letters, digits, '-' and '.' are allowed", h)
		}
	}
	return nil
}

func validDNS(d *runtimeapi.DNSConfig) error {
	if d == nil {
		return nil
	}
	if len(d.Servers) > maxDNSServers || len(d.Searches) > maxDNSSearches || len(d.Options) > maxDNSOptions {
		return invalid("dns config: at most %d servers, %d searches, %d options", maxDNSServers, maxDNSSearches, maxDNSOptions)
	}
	for _, s := range d.Servers {
		if _, err := netip.ParseAddr(s); err != nil {
			return invalid("dns server %q is not an IP address", s)
		}
	}
	total := 0
	for _, list := range [][]string{d.Searches, d.Options} {
		for _, s := range list {
			// Each one becomes a word of a resolv.conf line: a space or newline would inject
			// another word or directive.
			if s == "" || strings.ContainsFunc(s, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
				return invalid("dns search or option %q must be one word", s)
			}
			total += len(s) + 1
		}
	}
	if total > 2*maxDNSLine {
		return invalid("dns searches and options are too long")
	}
	return nil
}

// validSysctls admits only sysctls that are namespaced (they change the pod, not the node) in a
// namespace the pod owns. A key or value holding '=', '+' or a newline could smuggle a second
// setting past a runtime that writes them as "key=value" lines; refuse it even though nsmgr
// writes each file separately.
func validSysctls(sysctls map[string]string, hostNet, hostIPC bool) error {
	if len(sysctls) > maxSysctls {
		return invalid("%d sysctls, more than %d", len(sysctls), maxSysctls)
	}
	for k, v := range sysctls {
		if len(k) > 256 || len(v) > maxSysctlValueLen {
			return invalid("sysctl %q is too long", k)
		}
		if strings.ContainsAny(k, "=+ \t\n\r\x00") || strings.ContainsAny(v, "=+\n\r\x00") {
			return invalid("sysctl %q=%q: '=', '+', whitespace and newlines are not allowed", k, v)
		}
		for _, part := range strings.Split(k, ".") {
			if part == "" || strings.Contains(part, "..") || strings.HasPrefix(part, "/") || strings.HasSuffix(part, "/") {
				return invalid("sysctl %q: malformed name", k)
			}
			for _, c := range part {
				if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '/') {
					return invalid("sysctl %q: malformed name", k)
				}
			}
		}
		switch sysctlNamespace(k) {
		case "net":
			if hostNet {
				return invalid("sysctl %q needs the pod's own network namespace, and the pod uses the host's", k)
			}
		case "ipc":
			if hostIPC {
				return invalid("sysctl %q needs the pod's own IPC namespace, and the pod uses the host's", k)
			}
		default:
			return invalid("sysctl %q is not a namespaced sysctl a pod may set", k)
		}
	}
	return nil
}

// sysctlNamespace names the namespace a sysctl belongs to, or "" when it is node-wide.
func sysctlNamespace(k string) string {
	switch {
	case strings.HasPrefix(k, "net."):
		return "net"
	case k == "kernel.sem", strings.HasPrefix(k, "kernel.shm"), strings.HasPrefix(k, "kernel.msg"),
		strings.HasPrefix(k, "fs.mqueue."):
		return "ipc"
	}
	return ""
}

func hasDotDot(p string) bool {
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return true
		}
	}
	return false
}

// validUserns checks a pod's user namespace request. Unset options mean the host's user namespace
// (POD is the enum's zero value, hence the nil check). A pod of its own (POD) gets one uid and
// one gid mapping, each mapping container id 0 (as containerd and the kubelet do: a single
// range starting at 0), and owns its network, IPC and PID namespaces: a container in a user
// namespace cannot join the host's.
func validUserns(ns *runtimeapi.NamespaceOption) error {
	u := ns.GetUsernsOptions()
	if u == nil {
		return nil
	}
	switch u.GetMode() {
	case runtimeapi.NamespaceMode_NODE:
		if len(u.GetUids()) > 0 || len(u.GetGids()) > 0 {
			return invalid("user namespace mode NODE takes no id mappings")
		}
		return nil
	case runtimeapi.NamespaceMode_POD:
	default:
		return invalid("user namespace mode must be POD or NODE, not %s", u.GetMode())
	}
	for what, m := range map[string][]*runtimeapi.IDMapping{"uid": u.GetUids(), "gid": u.GetGids()} {
		if len(m) != 1 {
			return invalid("user namespace: want exactly one %s mapping, got %d", what, len(m))
		}
		if m[0].GetContainerId() != 0 {
			return invalid("user namespace: the %s mapping must start at container id 0, not %d", what, m[0].GetContainerId())
		}
		if m[0].GetLength() == 0 || uint64(m[0].GetHostId())+uint64(m[0].GetLength()) > 1<<32-1 {
			return invalid("user namespace: %s mapping of length %d from host id %d is out of range", what, m[0].GetLength(), m[0].GetHostId())
		}
	}
	if ns.GetNetwork() != runtimeapi.NamespaceMode_POD || ns.GetIpc() != runtimeapi.NamespaceMode_POD || ns.GetPid() == runtimeapi.NamespaceMode_NODE {
		return invalid("a pod with its own user namespace needs its own network, IPC and PID namespaces")
	}
	return nil
}
