package oci

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// DefaultCapabilities is the bounding set of an unprivileged container, the one Docker,
// containerd and CRI-O agree on.
var DefaultCapabilities = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE",
}

// allCapabilities are the capabilities a privileged container (or "ALL") gets: those the daemon
// holds itself. A runtime cannot grant more, and the daemon may run without some (here it lacks
// CAP_SYS_RESOURCE), so "all" taken literally would fail every privileged create.
func allCapabilities() []string {
	mask := ^uint64(0)
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
				fmt.Sscanf(strings.TrimSpace(v), "%x", &mask)
			}
		}
	}
	last := 40
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		fmt.Sscanf(strings.TrimSpace(string(b)), "%d", &last)
	}
	out := make([]string, 0, last+1)
	for i := 0; i <= last && i < len(capNames); i++ {
		if mask&(1<<uint(i)) != 0 {
			out = append(out, capNames[i])
		}
	}
	return out
}

var capNames = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
	"CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER",
	"CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT",
	"CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME",
	"CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE", "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL",
	"CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM",
	"CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE",
}

func normCap(c string) (string, error) {
	c = strings.ToUpper(strings.TrimSpace(c))
	if !strings.HasPrefix(c, "CAP_") {
		c = "CAP_" + c
	}
	for _, n := range capNames {
		if n == c {
			return c, nil
		}
	}
	return "", fmt.Errorf("unknown capability %q: %w", c, errdefs.ErrInvalidArgument)
}

func capabilities(sc *runtimeapi.LinuxContainerSecurityContext, privileged bool) (*specs.LinuxCapabilities, error) {
	var set []string
	if privileged {
		set = allCapabilities()
	} else {
		set = append(set, DefaultCapabilities...)
		c := sc.GetCapabilities()
		for _, a := range c.GetAddCapabilities() {
			if strings.EqualFold(a, "ALL") {
				set = allCapabilities()
				break
			}
		}
		for _, a := range c.GetAddCapabilities() {
			if strings.EqualFold(a, "ALL") {
				continue
			}
			n, err := normCap(a)
			if err != nil {
				return nil, err
			}
			if !contains(set, n) {
				set = append(set, n)
			}
		}
		for _, d := range c.GetDropCapabilities() {
			if strings.EqualFold(d, "ALL") {
				set = nil
				// Explicit adds survive a drop of ALL, as in other runtimes.
				for _, a := range c.GetAddCapabilities() {
					if n, err := normCap(a); err == nil {
						set = append(set, n)
					}
				}
				continue
			}
			n, err := normCap(d)
			if err != nil {
				return nil, err
			}
			set = remove(set, n)
		}
	}
	caps := &specs.LinuxCapabilities{
		Bounding:  set,
		Effective: set,
		Permitted: set,
	}
	for _, a := range sc.GetCapabilities().GetAddAmbientCapabilities() {
		n, err := normCap(a)
		if err != nil {
			return nil, err
		}
		caps.Ambient = append(caps.Ambient, n)
		caps.Inheritable = append(caps.Inheritable, n)
	}
	return caps, nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func remove(s []string, v string) []string {
	out := s[:0:0]
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

// seccompFor picks the container's seccomp filter. An unset profile is Unconfined, the CRI default;
// the kubelet asks for RuntimeDefault explicitly when the pod wants it.
func seccompFor(sc *runtimeapi.LinuxContainerSecurityContext, privileged bool) (*specs.LinuxSeccomp, error) {
	if privileged {
		return nil, nil
	}
	p := sc.GetSeccomp()
	if p != nil && p.GetProfileType() != runtimeapi.SecurityProfile_Localhost && p.GetLocalhostRef() != "" {
		return nil, fmt.Errorf("seccomp profile %v names a localhost file %q: only Localhost profiles may: %w",
			p.GetProfileType(), p.GetLocalhostRef(), errdefs.ErrInvalidArgument)
	}
	if p == nil {
		switch path := sc.GetSeccompProfilePath(); {
		case path == "" || path == "unconfined":
			return nil, nil
		case path == "runtime/default" || path == "docker/default":
			p = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
		case strings.HasPrefix(path, "localhost/"):
			p = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: strings.TrimPrefix(path, "localhost/")}
		default:
			return nil, fmt.Errorf("seccomp profile %q: %w", path, errdefs.ErrInvalidArgument)
		}
	}
	switch p.GetProfileType() {
	case runtimeapi.SecurityProfile_Unconfined:
		return nil, nil
	case runtimeapi.SecurityProfile_RuntimeDefault:
		return DefaultSeccomp(sc.GetCapabilities().GetAddCapabilities()), nil
	case runtimeapi.SecurityProfile_Localhost:
		return localhostSeccomp(p.GetLocalhostRef())
	}
	return nil, fmt.Errorf("seccomp profile type %v: %w", p.GetProfileType(), errdefs.ErrInvalidArgument)
}

// setDevices gives the container the devices the request names (and every host device when
// privileged), and opens the device cgroup for exactly those.
func setDevices(s *specs.Spec, devs []*runtimeapi.Device, privileged bool) error {
	if privileged {
		s.Linux.Resources.Devices = []specs.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}
		hostDevs, _ := hostDevices()
		s.Linux.Devices = append(s.Linux.Devices, hostDevs...)
	}
	for _, d := range devs {
		perms := d.GetPermissions()
		if perms == "" {
			perms = "rwm"
		}
		if strings.Trim(perms, "rwm") != "" {
			return fmt.Errorf("device %q: permissions %q: %w", d.GetHostPath(), perms, errdefs.ErrInvalidArgument)
		}
		if !filepath.IsAbs(d.GetContainerPath()) || strings.Contains(d.GetContainerPath(), "..") {
			return fmt.Errorf("device container path %q: %w", d.GetContainerPath(), errdefs.ErrInvalidArgument)
		}
		dev, err := deviceFromPath(d.GetHostPath())
		if err != nil {
			return fmt.Errorf("device %q: %v: %w", d.GetHostPath(), err, errdefs.ErrInvalidArgument)
		}
		dev.Path = d.GetContainerPath()
		s.Linux.Devices = append(s.Linux.Devices, *dev)
		major, minor := dev.Major, dev.Minor
		s.Linux.Resources.Devices = append(s.Linux.Resources.Devices, specs.LinuxDeviceCgroup{
			Allow: true, Type: dev.Type, Major: &major, Minor: &minor, Access: perms,
		})
	}
	return nil
}
