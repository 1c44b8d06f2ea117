package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/internal/apparmor"
	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// ConfigError is a container the agent will not create as specified; the pod's status shows
// CreateContainerConfigError with exactly this message, as the kubelet words it.
type ConfigError struct{ Msg string }

func (e *ConfigError) Error() string { return e.Msg }

// Is makes errors.Is(err, kubecontainer.ErrCreateConfig) hold, so the reason cache finds the reason.
func (e *ConfigError) Is(target error) bool { return target == kubecontainer.ErrCreateConfig }

// kubeletPodName is how the kubelet names a pod in messages users and tools match on: name_namespace(uid).
func kubeletPodName(pod *v1.Pod) string {
	return fmt.Sprintf("%s(%s)", kubecontainer.BuildPodFullName(pod.Name, pod.Namespace), pod.UID)
}

// effectiveNonRoot is the container's runAsNonRoot and runAsUser, each falling back to the pod's.
func effectiveNonRoot(pod *v1.Pod, c *v1.Container) (nonRoot bool, runAsUser *int64) {
	if psc := pod.Spec.SecurityContext; psc != nil {
		nonRoot = psc.RunAsNonRoot != nil && *psc.RunAsNonRoot
		runAsUser = psc.RunAsUser
	}
	if csc := c.SecurityContext; csc != nil {
		if csc.RunAsNonRoot != nil {
			nonRoot = *csc.RunAsNonRoot
		}
		if csc.RunAsUser != nil {
			runAsUser = csc.RunAsUser
		}
	}
	return nonRoot, runAsUser
}

// imageUser is the user the image runs as by the runtime's ImageStatus: a uid, or a name that
// cannot be checked. An image that names no user runs as root.
func (m *Manager) imageUser(ctx context.Context, imageRef string) (*int64, string, error) {
	resp, err := m.Images.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: imageRef}})
	if err != nil {
		return nil, "", fmt.Errorf("image status %s: %w", imageRef, err)
	}
	img := resp.GetImage()
	if uid := img.GetUid(); uid != nil {
		return &uid.Value, "", nil
	}
	if name := img.GetUsername(); name != "" {
		// A runtime that passes "uid[:gid]" through as a name still means a uid.
		user, _, _ := strings.Cut(name, ":")
		if uid, err := strconv.ParseInt(user, 10, 64); err == nil {
			return &uid, "", nil
		}
		return nil, name, nil
	}
	root := int64(0)
	return &root, "", nil
}

// verifyRunAsNonRoot refuses a container whose effective runAsNonRoot is true but which would run
// as root: runAsUser 0, or no runAsUser and an image user that is root or cannot be checked.
func (m *Manager) verifyRunAsNonRoot(ctx context.Context, pod *v1.Pod, c *v1.Container, imageRef string) error {
	nonRoot, runAsUser := effectiveNonRoot(pod, c)
	if !nonRoot {
		return nil
	}
	if runAsUser != nil {
		if *runAsUser == 0 {
			return &ConfigError{fmt.Sprintf("container's runAsUser breaks non-root policy (pod: %q, container: %s)", kubeletPodName(pod), c.Name)}
		}
		return nil
	}
	uid, name, err := m.imageUser(ctx, imageRef)
	if err != nil {
		return &ConfigError{err.Error()}
	}
	switch {
	case uid == nil:
		return &ConfigError{fmt.Sprintf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root (pod: %q, container: %s)",
			name, kubeletPodName(pod), c.Name)}
	case *uid == 0:
		return &ConfigError{fmt.Sprintf("container has runAsNonRoot and image will run as root (pod: %q, container: %s)", kubeletPodName(pod), c.Name)}
	}
	if errs := validation.IsValidUserID(*uid); len(errs) > 0 {
		return &ConfigError{fmt.Sprintf("container has runAsNonRoot and image has an invalid user id (%d). (Must be 1-(%d)): %s (pod: %q, container: %s)",
			*uid, math.MaxInt32, strings.Join(errs, "; "), kubeletPodName(pod), c.Name)}
	}
	return nil
}

// seccompProfileDir is where Localhost seccomp profiles are looked up, <root-dir>/seccomp as the
// kubelet has it, so profiles installed for the kubelet (by the Security Profiles Operator, say)
// work unchanged.
const seccompProfileDir = "seccomp"

// containerSecurityProfiles fills in what the kubelet derives per container beyond the plain
// fields: the seccomp and AppArmor profiles, the effective SELinux options and the /proc paths
// the procMount leaves masked and read-only.
func (m *Manager) containerSecurityProfiles(pod *v1.Pod, c *v1.Container, sc *runtimeapi.LinuxContainerSecurityContext) error {
	var err error
	if sc.Seccomp, err = m.containerSeccomp(pod, c); err != nil {
		return err
	}
	if sc.Apparmor, sc.ApparmorProfile, err = appArmorProfile(pod, c); err != nil {
		return err
	}
	sc.SelinuxOptions = containerSELinux(pod, c)
	var procMount *v1.ProcMountType
	if c.SecurityContext != nil {
		procMount = c.SecurityContext.ProcMount
	}
	sc.MaskedPaths, sc.ReadonlyPaths = procPaths(procMount)
	return nil
}

// containerSeccomp is the container's seccompProfile, else the pod's, else RuntimeDefault when
// the agent's seccompDefault is on, else Unconfined: the kubelet's order. The deprecated
// seccomp annotations are not read: the kubelet stopped honouring them in v1.27.
func (m *Manager) containerSeccomp(pod *v1.Pod, c *v1.Container) (*runtimeapi.SecurityProfile, error) {
	if c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil {
		return m.seccompFromField(c.SecurityContext.SeccompProfile)
	}
	if psc := pod.Spec.SecurityContext; psc != nil && psc.SeccompProfile != nil {
		return m.seccompFromField(psc.SeccompProfile)
	}
	if m.SeccompDefault {
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	}
	return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
}

// seccompFromField resolves a Localhost profile's name under <root-dir>/seccomp: runtimes take
// only absolute paths. The name must descend from there; the apiserver refuses any other, and the
// check is repeated here because the name becomes a host path read by the runtime.
func (m *Manager) seccompFromField(sp *v1.SeccompProfile) (*runtimeapi.SecurityProfile, error) {
	switch sp.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}, nil
	case v1.SeccompProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}, nil
	case v1.SeccompProfileTypeLocalhost:
		if sp.LocalhostProfile == nil || *sp.LocalhostProfile == "" {
			return nil, errors.New("localhostProfile must be set if seccompProfile type is Localhost.")
		}
		name := *sp.LocalhostProfile
		if err := descendingPath(name); err != nil {
			return nil, fmt.Errorf("seccompProfile.localhostProfile %q: %w", name, err)
		}
		if m.RootDir == "" {
			return nil, fmt.Errorf("seccompProfile.localhostProfile %q: the agent has no root dir to find it under", name)
		}
		root, err := filepath.Abs(filepath.Join(m.RootDir, seccompProfileDir))
		if err != nil {
			return nil, err
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost,
			LocalhostRef: filepath.Join(root, filepath.FromSlash(name))}, nil
	}
	return nil, fmt.Errorf("seccompProfile.type %q is not supported (Localhost, RuntimeDefault, Unconfined are)", sp.Type)
}

// descendingPath refuses a name that would leave the folder it is joined under: absolute, with a
// ".." element, or holding a NUL byte.
func descendingPath(p string) error {
	if strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) {
		return errors.New("must be a relative path")
	}
	if strings.IndexByte(p, 0) >= 0 {
		return errors.New("must not contain a NUL byte")
	}
	for _, elem := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == '\\' }) {
		if elem == ".." {
			return errors.New("must not contain '..'")
		}
	}
	return nil
}

// appArmorProfile is the CRI form of the container's AppArmor profile, and the deprecated string
// form ("localhost/<name>") the kubelet still sends for runtimes that read only that.
func appArmorProfile(pod *v1.Pod, c *v1.Container) (*runtimeapi.SecurityProfile, string, error) {
	p := apparmor.Profile(pod, c)
	if p == nil {
		return nil, "", nil
	}
	switch p.Type {
	case v1.AppArmorProfileTypeRuntimeDefault:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault},
			v1.DeprecatedAppArmorBetaProfileRuntimeDefault, nil
	case v1.AppArmorProfileTypeUnconfined:
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined},
			v1.DeprecatedAppArmorBetaProfileNameUnconfined, nil
	case v1.AppArmorProfileTypeLocalhost:
		if p.LocalhostProfile == nil {
			return nil, "", errors.New("missing localhost apparmor profile name")
		}
		return &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: *p.LocalhostProfile},
			v1.DeprecatedAppArmorBetaProfileNamePrefix + *p.LocalhostProfile, nil
	}
	return nil, "", fmt.Errorf("unknown apparmor profile type: %q", p.Type)
}

// containerSELinux is the container's seLinuxOptions, else the pod's, whole (the fields are not
// merged one by one), as the kubelet sends them.
func containerSELinux(pod *v1.Pod, c *v1.Container) *runtimeapi.SELinuxOption {
	if c.SecurityContext != nil && c.SecurityContext.SELinuxOptions != nil {
		return seLinuxOption(c.SecurityContext.SELinuxOptions)
	}
	if psc := pod.Spec.SecurityContext; psc != nil {
		return seLinuxOption(psc.SELinuxOptions)
	}
	return nil
}

func seLinuxOption(o *v1.SELinuxOptions) *runtimeapi.SELinuxOption {
	if o == nil {
		return nil
	}
	return &runtimeapi.SELinuxOption{User: o.User, Role: o.Role, Type: o.Type, Level: o.Level}
}

// procPaths are the /proc and /sys paths masked and made read-only: none for procMount Unmasked
// (which the apiserver allows only with hostUsers: false), the kubelet's defaults otherwise. The
// kubelet sends them for privileged containers too; runtimes leave those unmasked.
func procPaths(procMount *v1.ProcMountType) (masked, readonly []string) {
	if procMount != nil && *procMount == v1.UnmaskedProcMount {
		return []string{}, []string{}
	}
	return defaultMaskedPaths(), append([]string(nil), defaultReadonlyPaths...)
}

// The paths the kubelet masks and makes read-only in every unprivileged container. Runtimes such as
// containerd use the list they are sent as is, so sending none would expose /proc/kcore and friends.
// The masked ones also include each CPU's thermal_throttle folder the machine has, whose counters
// tell of the host's load; they are looked up once, on first use.
var (
	kubeletMaskedPaths = sync.OnceValue(func() []string {
		paths := []string{"/proc/asound", "/proc/acpi", "/proc/interrupts", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
			"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware", "/sys/devices/virtual/powercap"}
		return append(paths, thermalThrottlePaths("/sys/devices/system/cpu")...)
	})
	defaultReadonlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
)

func defaultMaskedPaths() []string { return append([]string(nil), kubeletMaskedPaths()...) }

// thermalThrottlePaths lists <cpuDir>/cpu<N>/thermal_throttle that exist, by CPU number.
func thermalThrottlePaths(cpuDir string) []string {
	entries, err := os.ReadDir(cpuDir)
	if err != nil {
		return nil
	}
	var cpus []int
	for _, e := range entries {
		n, err := strconv.Atoi(strings.TrimPrefix(e.Name(), "cpu"))
		if err != nil || !strings.HasPrefix(e.Name(), "cpu") || n < 0 {
			continue
		}
		if _, err := os.Stat(filepath.Join(cpuDir, e.Name(), "thermal_throttle")); err == nil {
			cpus = append(cpus, n)
		}
	}
	sort.Ints(cpus)
	out := make([]string, 0, len(cpus))
	for _, n := range cpus {
		out = append(out, filepath.Join(cpuDir, "cpu"+strconv.Itoa(n), "thermal_throttle"))
	}
	return out
}
