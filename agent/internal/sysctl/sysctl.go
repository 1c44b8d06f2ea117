// Package sysctl is the kubelet's sysctl admission: a pod's spec.securityContext.sysctls must each
// be in the safe set or match the node's allowedUnsafeSysctls, and must not reach into a namespace
// the pod shares with the host (net.* with hostNetwork, IPC sysctls with hostIPC). Without it a pod
// could set any namespaced sysctl the runtime accepts, and with hostNetwork the host's own.
package sysctl

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	v1 "k8s.io/api/core/v1"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"

	"github.com/nodelet/nodelet/internal/lazy"
)

// ForbiddenReason is the pod status reason of a rejected pod, as the kubelet's.
const ForbiddenReason = "SysctlForbidden"

// ErrInvalidPattern: an allowedUnsafeSysctls entry that is malformed or not known to be namespaced.
var ErrInvalidPattern = errors.New("invalid allowed unsafe sysctl")

// ForbiddenError rejects a pod; Message is the pod status message, worded as the kubelet's.
type ForbiddenError struct{ Message string }

func (e *ForbiddenError) Error() string { return e.Message }

// safe is the kubelet's safe set as of Kubernetes 1.34: namespaced, and isolated from other pods.
// Each needs a kernel older than any the agent supports (the newest, tcp_rmem/tcp_wmem, 4.15).
var safe = []string{
	"kernel.shm_rmid_forced",
	"net.ipv4.ip_local_port_range",
	"net.ipv4.tcp_syncookies",
	"net.ipv4.ping_group_range",
	"net.ipv4.ip_unprivileged_port_start",
	"net.ipv4.ip_local_reserved_ports",
	"net.ipv4.tcp_keepalive_time",
	"net.ipv4.tcp_fin_timeout",
	"net.ipv4.tcp_keepalive_intvl",
	"net.ipv4.tcp_keepalive_probes",
	"net.ipv4.tcp_rmem",
	"net.ipv4.tcp_wmem",
}

// Safe returns the safe set.
func Safe() []string { return append([]string(nil), safe...) }

type namespace string

const (
	ipcNamespace namespace = "ipc"
	netNamespace namespace = "net"
	noNamespace  namespace = ""
)

// namespaceOf is the kernel namespace a sysctl (or a pattern's prefix) lives in; noNamespace for
// those known not to be namespaced, which no pod may set.
func namespaceOf(name string) namespace {
	if name == "kernel.sem" {
		return ipcNamespace
	}
	for prefix, ns := range map[string]namespace{"kernel.shm": ipcNamespace, "kernel.msg": ipcNamespace, "fs.mqueue.": ipcNamespace, "net.": netNamespace} {
		if strings.HasPrefix(name, prefix) {
			return ns
		}
	}
	return noNamespace
}

const maxNameLength = 253

var patternRE = lazy.Value[*regexp.Regexp]{New: func() *regexp.Regexp {
	return regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*([a-z0-9]([-_a-z0-9]*[a-z0-9])?\*?|\*)$`)
}}

// Allowlist admits pods by their sysctls.
type Allowlist struct {
	names    map[string]namespace
	prefixes map[string]namespace
}

// New makes the allowlist of the safe set plus allowedUnsafe (names, or prefixes ending in "*").
func New(allowedUnsafe []string) (*Allowlist, error) {
	w := &Allowlist{names: map[string]namespace{}, prefixes: map[string]namespace{}}
	for _, p := range append(Safe(), allowedUnsafe...) {
		if len(p) > maxNameLength || !patternRE.Get().MatchString(p) {
			return nil, fmt.Errorf("sysctl %q must have at most %d characters and be dot- or slash-separated lower-case segments, optionally ending in *: %w",
				p, maxNameLength, ErrInvalidPattern)
		}
		p = utilsysctl.NormalizeName(p)
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			ns := namespaceOf(prefix)
			if ns == noNamespace {
				return nil, fmt.Errorf("the sysctls %q are not known to be namespaced: %w", p, ErrInvalidPattern)
			}
			w.prefixes[prefix] = ns
			continue
		}
		ns := namespaceOf(p)
		if ns == noNamespace {
			return nil, fmt.Errorf("the sysctl %q is not known to be namespaced: %w", p, ErrInvalidPattern)
		}
		w.names[p] = ns
	}
	return w, nil
}

// check is nil when name is allowlisted and its namespace is the pod's own.
func (w *Allowlist) check(name string, hostNet, hostIPC bool) error {
	name = utilsysctl.NormalizeName(name)
	ns, ok := w.names[name]
	if !ok {
		for p, pns := range w.prefixes {
			if strings.HasPrefix(name, p) {
				ns, ok = pns, true
				break
			}
		}
	}
	switch {
	case !ok:
		return fmt.Errorf("%q not allowlisted", name)
	case ns == ipcNamespace && hostIPC, ns == netNamespace && hostNet:
		return fmt.Errorf("%q not allowed with host %s enabled", name, ns)
	}
	return nil
}

// Admit returns a *ForbiddenError for the first sysctl of the pod that may not be set.
func (w *Allowlist) Admit(pod *v1.Pod) error {
	sc := pod.Spec.SecurityContext
	if sc == nil {
		return nil
	}
	for _, s := range sc.Sysctls {
		if err := w.check(s.Name, pod.Spec.HostNetwork, pod.Spec.HostIPC); err != nil {
			return &ForbiddenError{Message: fmt.Sprintf("forbidden sysctl: %v", err)}
		}
	}
	return nil
}
