// Package oci turns a CRI container request into an OCI runtime bundle, and drives the OCI runtimes
// (runc, crun, runsc) and conmon, the monitor that holds each container's stdio and exit code.
package oci

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/cgroupfs"
	"github.com/nodelet/nodelet/runtime/errdefs"
)

// SpecInput is everything a container's OCI spec is made from. The sandbox fields come from the
// pod's record; empty namespace paths mean the host's namespace.
type SpecInput struct {
	ID        string
	Config    *runtimeapi.ContainerConfig
	Sandbox   *runtimeapi.PodSandboxConfig
	Rootfs    string
	Image     imagespec.ImageConfig
	NetNSPath string
	IPCNSPath string
	UTSNSPath string
	PIDNSPath string
	// UserNSPath is the pod's own user namespace, mapped as the sandbox config's userns_options
	// say; its other namespaces are owned by it.
	UserNSPath string
	// TargetPIDNSPath is the PID namespace of the container a debug container targets
	// (NamespaceMode TARGET), e.g. /proc/<its pid>/ns/pid.
	TargetPIDNSPath string
	ShmPath         string
	SandboxDir      string // holds hostname, hosts, resolv.conf
	CgroupsPath     string
	// MinOOMScoreAdj is the lowest oom_score_adj the daemon may set (its own); requests below it
	// are raised to it, since without CAP_SYS_RESOURCE the kernel refuses them.
	MinOOMScoreAdj int
	// Gvisor, when set, makes the container a subcontainer of its pod's gVisor sandbox.
	Gvisor *GvisorPlacement
	// LSM are the security modules AppArmor profiles and SELinux labels are chosen against; nil
	// means this machine's (HostSecurityModules).
	LSM SecurityModules
}

// ociVersion is the spec version written: the oldest one the runtimes here (crun 1.8 refuses
// newer majors it does not know) accept, and all the fields used exist in it.
const ociVersion = "1.0.2-dev"

const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// Generate builds the OCI spec. Errors wrap errdefs.ErrInvalidArgument for bad requests and
// errdefs.ErrFailedPrecondition for a request the image cannot satisfy (e.g. run-as-non-root).
func Generate(in SpecInput) (*specs.Spec, error) {
	cfg := in.Config
	sc := cfg.GetLinux().GetSecurityContext()
	privileged := sc.GetPrivileged()
	if privileged && !in.Sandbox.GetLinux().GetSecurityContext().GetPrivileged() {
		return nil, fmt.Errorf("privileged container in a non-privileged sandbox: %w", errdefs.ErrInvalidArgument)
	}
	args, err := processArgs(cfg, in.Image)
	if err != nil {
		return nil, err
	}
	cwd := cfg.GetWorkingDir()
	if cwd == "" {
		// An image's working dir may be relative (Dockerfiles allow it): it is relative to /.
		cwd = filepath.Join("/", in.Image.WorkingDir)
	}
	user, err := resolveUser(in.Rootfs, sc, in.Image.User)
	if err != nil {
		return nil, err
	}
	s := &specs.Spec{
		Version: ociVersion,
		Root:    &specs.Root{Path: in.Rootfs, Readonly: sc.GetReadonlyRootfs()},
		Process: &specs.Process{
			Args:            args,
			Env:             mergeEnv(in.Image.Env, cfg.GetEnvs(), in.Sandbox.GetHostname()),
			Cwd:             cwd,
			User:            user,
			Terminal:        cfg.GetTty(),
			NoNewPrivileges: sc.GetNoNewPrivs(),
		},
		Annotations: map[string]string{},
		Linux: &specs.Linux{
			CgroupsPath: in.CgroupsPath,
			Resources:   &specs.LinuxResources{Devices: []specs.LinuxDeviceCgroup{{Allow: false, Access: "rwm"}}},
		},
	}
	for k, v := range cfg.GetAnnotations() {
		s.Annotations[k] = v
	}
	if in.Gvisor != nil {
		in.Gvisor.annotate(s.Annotations)
	}

	caps, err := capabilities(sc, privileged)
	if err != nil {
		return nil, err
	}
	s.Process.Capabilities = caps
	if in.Gvisor != nil {
		in.Gvisor.dropUnknownCaps(s.Process)
	}
	if v := in.Image.StopSignal; v != "" {
		s.Annotations["org.opencontainers.image.stopSignal"] = v
	}
	if err := setNamespaces(s, in); err != nil {
		return nil, err
	}
	if in.Gvisor != nil {
		in.Gvisor.setPIDNamespace(s, in.Config.GetLinux().GetSecurityContext().GetNamespaceOptions())
		in.Gvisor.setHostname(s)
	}
	if err := setMounts(s, in, privileged); err != nil {
		return nil, err
	}
	if err := setDevices(s, cfg.GetDevices(), privileged); err != nil {
		return nil, err
	}
	setPaths(s, sc, privileged, in.UserNSPath != "")
	seccomp, err := seccompFor(sc, privileged)
	if err != nil {
		return nil, err
	}
	s.Linux.Seccomp = seccomp
	if err := setSecurityLabels(s, in, privileged); err != nil {
		return nil, err
	}
	res := cfg.GetLinux().GetResources()
	if err := ApplyResources(s.Linux.Resources, res); err != nil {
		return nil, err
	}
	adj := int(res.GetOomScoreAdj())
	if adj < in.MinOOMScoreAdj {
		adj = in.MinOOMScoreAdj
	}
	s.Process.OOMScoreAdj = &adj
	s.Linux.Sysctl = podSysctls(in)
	return s, nil
}

// processArgs applies the kubelet's rules: command replaces the image entrypoint (and then the
// image cmd is dropped), args replace the image cmd.
func processArgs(cfg *runtimeapi.ContainerConfig, img imagespec.ImageConfig) ([]string, error) {
	var args []string
	if len(cfg.GetCommand()) > 0 {
		args = append(append(args, cfg.GetCommand()...), cfg.GetArgs()...)
	} else {
		args = append(args, img.Entrypoint...)
		if len(cfg.GetArgs()) > 0 {
			args = append(args, cfg.GetArgs()...)
		} else {
			args = append(args, img.Cmd...)
		}
	}
	if len(args) == 0 {
		return nil, fmt.Errorf("no command: neither the request nor the image names one: %w", errdefs.ErrInvalidArgument)
	}
	return args, nil
}

func mergeEnv(image []string, envs []*runtimeapi.KeyValue, hostname string) []string {
	order := []string{}
	vals := map[string]string{}
	set := func(k, v string) {
		if _, ok := vals[k]; !ok {
			order = append(order, k)
		}
		vals[k] = v
	}
	set("PATH", strings.TrimPrefix(defaultPath, "PATH="))
	if hostname != "" {
		set("HOSTNAME", hostname)
	}
	for _, e := range image {
		k, v, _ := strings.Cut(e, "=")
		set(k, v)
	}
	for _, e := range envs {
		set(e.GetKey(), string(e.GetValue()))
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vals[k])
	}
	return out
}

func setNamespaces(s *specs.Spec, in SpecInput) error {
	nsOpts := in.Config.GetLinux().GetSecurityContext().GetNamespaceOptions()
	ns := []specs.LinuxNamespace{{Type: specs.MountNamespace}}
	if in.NetNSPath != "" {
		ns = append(ns, specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: in.NetNSPath})
	}
	if in.IPCNSPath != "" {
		ns = append(ns, specs.LinuxNamespace{Type: specs.IPCNamespace, Path: in.IPCNSPath})
	}
	if in.UTSNSPath != "" {
		ns = append(ns, specs.LinuxNamespace{Type: specs.UTSNamespace, Path: in.UTSNSPath})
	}
	switch nsOpts.GetPid() {
	case runtimeapi.NamespaceMode_NODE:
	case runtimeapi.NamespaceMode_POD:
		if in.PIDNSPath != "" {
			ns = append(ns, specs.LinuxNamespace{Type: specs.PIDNamespace, Path: in.PIDNSPath})
		} else {
			ns = append(ns, specs.LinuxNamespace{Type: specs.PIDNamespace})
		}
	case runtimeapi.NamespaceMode_TARGET:
		if in.TargetPIDNSPath == "" {
			return fmt.Errorf("pid namespace of target %q: no such running container: %w", nsOpts.GetTargetId(), errdefs.ErrNotFound)
		}
		ns = append(ns, specs.LinuxNamespace{Type: specs.PIDNamespace, Path: in.TargetPIDNSPath})
	default:
		ns = append(ns, specs.LinuxNamespace{Type: specs.PIDNamespace})
	}
	if in.UserNSPath != "" {
		// runc and crun join the user namespace first, then the others (owned by it), and want
		// the mappings even for a namespace they join.
		ns = append(ns, specs.LinuxNamespace{Type: specs.UserNamespace, Path: in.UserNSPath})
		u := in.Sandbox.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions()
		s.Linux.UIDMappings = idMappings(u.GetUids())
		s.Linux.GIDMappings = idMappings(u.GetGids())
	}
	s.Linux.Namespaces = ns
	if in.UTSNSPath != "" {
		// The pod's UTS namespace already has it; runsc, which does not use the host's namespace
		// for its guest, only learns it from here.
		s.Hostname = in.Sandbox.GetHostname()
	}
	return nil
}

// podSysctls passes the pod's sysctls, minus those of namespaces the container shares with the
// host (the runtime would refuse them, and they would change the node).
func podSysctls(in SpecInput) map[string]string {
	src := in.Sandbox.GetLinux().GetSysctls()
	if len(src) == 0 {
		return nil
	}
	out := map[string]string{}
	for k, v := range src {
		isNet := strings.HasPrefix(k, "net.")
		isIPC := strings.HasPrefix(k, "kernel.shm") || strings.HasPrefix(k, "kernel.msg") ||
			k == "kernel.sem" || strings.HasPrefix(k, "fs.mqueue.")
		if isNet && in.NetNSPath == "" || isIPC && in.IPCNSPath == "" {
			continue
		}
		out[k] = v
	}
	return out
}

// setPaths masks and write-protects the parts of /proc and /sys a container must not use. CRI
// cannot tell an empty list from none sent: the kubelet sends empty lists for procMount Unmasked,
// which the apiserver allows only in a user namespace. So a container in its own user namespace
// that is sent no lists gets none, as asked; any other gets the defaults, so that a client that
// sends no lists (crictl) never leaves a container sharing the host's users with an unmasked /proc.
func setPaths(s *specs.Spec, sc *runtimeapi.LinuxContainerSecurityContext, privileged, userns bool) {
	if privileged {
		return
	}
	masked, ro := sc.GetMaskedPaths(), sc.GetReadonlyPaths()
	if masked == nil && ro == nil && userns {
		return
	}
	if masked == nil {
		masked = DefaultMaskedPaths
	}
	if ro == nil {
		ro = DefaultReadonlyPaths
	}
	s.Linux.MaskedPaths = append([]string(nil), masked...)
	s.Linux.ReadonlyPaths = append([]string(nil), ro...)
}

// setSecurityLabels sets the AppArmor profile and SELinux labels the host's modules call for.
func setSecurityLabels(s *specs.Spec, in SpecInput, privileged bool) error {
	lsm := in.securityModules()
	profile, err := appArmorFor(in.Config.GetLinux().GetSecurityContext(), privileged, lsm)
	if err != nil {
		return err
	}
	s.Process.ApparmorProfile = profile
	s.Process.SelinuxLabel, s.Linux.MountLabel, err = seLinuxLabels(in, privileged, lsm)
	return err
}

// DefaultMaskedPaths and DefaultReadonlyPaths are the kernel interfaces hidden from, or frozen for,
// unprivileged containers, the same set other runtimes use.
var (
	DefaultMaskedPaths = []string{
		"/proc/acpi", "/proc/asound", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
		"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
		"/sys/firmware", "/sys/devices/virtual/powercap",
	}
	DefaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

// ApplyResources sets CRI resources onto an OCI resources block. It is shared by create and
// update, so a limit means the same thing on both paths.
func ApplyResources(r *specs.LinuxResources, res *runtimeapi.LinuxContainerResources) error {
	if res == nil {
		return nil
	}
	if res.GetCpuQuota() < 0 && res.GetCpuQuota() != -1 || res.GetCpuPeriod() < 0 || res.GetCpuShares() < 0 || res.GetMemoryLimitInBytes() < 0 {
		return fmt.Errorf("negative resource limit: %w", errdefs.ErrInvalidArgument)
	}
	if r.CPU == nil {
		r.CPU = &specs.LinuxCPU{}
	}
	if v := res.GetCpuShares(); v != 0 {
		u := uint64(v)
		r.CPU.Shares = &u
	}
	if v := res.GetCpuQuota(); v != 0 {
		r.CPU.Quota = &v
	}
	if v := res.GetCpuPeriod(); v != 0 {
		u := uint64(v)
		r.CPU.Period = &u
	}
	// Empty keeps what is there: an update (the CPU manager's) may carry nothing but a cpuset,
	// or no cpuset at all (a resize), and must not reset the rest.
	if v := res.GetCpusetCpus(); v != "" {
		r.CPU.Cpus = v
	}
	if v := res.GetCpusetMems(); v != "" {
		r.CPU.Mems = v
	}
	h := thisHost()
	if err := applyMemory(r, res, h); err != nil {
		return err
	}
	// The kubelet sends a limit for every huge page size the node has; a runtime refuses them
	// when the hugetlb controller is not where it manages cgroups (here: bound to v2 on a v1
	// host), so they are kept only when they can be applied.
	if hp := hugepageLimits(res); len(hp) > 0 {
		r.HugepageLimits = nil
	}
	for _, h := range hugepageLimits(res) {
		r.HugepageLimits = append(r.HugepageLimits, specs.LinuxHugepageLimit{Pagesize: h.GetPageSize(), Limit: h.GetLimit()})
	}
	return applyUnified(r, res, h)
}

func hugepageLimits(res *runtimeapi.LinuxContainerResources) []*runtimeapi.HugepageLimit {
	if !cgroupfs.Host().HasController("hugetlb") {
		return nil
	}
	return res.GetHugepageLimits()
}

// MinOOMScoreAdj reads the daemon's own oom_score_adj: without CAP_SYS_RESOURCE nothing lower
// can be set for its children.
func MinOOMScoreAdj() int {
	b, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return 0
	}
	var v int
	if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d", &v); err != nil {
		return 0
	}
	if hasCapSysResource() {
		return -1000
	}
	return v
}

func hasCapSysResource() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			var mask uint64
			if _, err := fmt.Sscanf(strings.TrimSpace(v), "%x", &mask); err != nil {
				return false
			}
			return mask&(1<<24) != 0 // CAP_SYS_RESOURCE
		}
	}
	return false
}

// WriteBundle writes config.json into dir.
//
// It is renamed into place (never seen half-written) but not fsynced: the container's record,
// written and synced after it, is what recovery trusts, and only a power loss could lose the
// file — which also ends the container it describes, so recovery marks it exited either way.
// The fsync cost a millisecond or more of every CreateContainer.
func WriteBundle(dir string, s *specs.Spec) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, "config.json")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

func idMappings(m []*runtimeapi.IDMapping) []specs.LinuxIDMapping {
	out := make([]specs.LinuxIDMapping, 0, len(m))
	for _, e := range m {
		out = append(out, specs.LinuxIDMapping{ContainerID: e.GetContainerId(), HostID: e.GetHostId(), Size: e.GetLength()})
	}
	return out
}
