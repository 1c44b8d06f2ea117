package oci

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/internal/lazy"
	"github.com/nodelet/nodelet/runtime/errdefs"
)

// seLinuxLevelPattern is the MLS/MCS level form containerd accepts (s0, s0-s0:c0.c1023,
// s0:c1,c2…); checked whether or not SELinux is on, as containerd does, so a request is judged
// the same on every host.
var seLinuxLevelPattern = lazy.Value[*regexp.Regexp]{New: func() *regexp.Regexp {
	return regexp.MustCompile(`^s\d(-s\d)?(:c\d{1,4}(\.c\d{1,4})?(,c\d{1,4}(\.c\d{1,4})?)*)?$`)
}}

// seLinuxNamePattern is what a context's user, role and type may be: a ':' would let one field
// forge the next.
var seLinuxNamePattern = lazy.Value[*regexp.Regexp]{New: func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9_.-]{1,255}$`)
}}

// seLinuxLabels are the container's process label and the label of the mounts the OCI runtime
// makes for it. Where the kernel runs no SELinux they are empty and the options are otherwise
// ignored, as containerd ignores them. Where it does, the policy's container contexts are taken
// and the options (the container's, else the pod's) replace their user, role, type and level; a
// pod that names no level gets one MCS level of its own, shared by its containers and by no
// other pod. A privileged container keeps the runtime's own process label, as in containerd.
func seLinuxLabels(in SpecInput, privileged bool, lsm SecurityModules) (process, mount string, err error) {
	opts := in.Config.GetLinux().GetSecurityContext().GetSelinuxOptions()
	pod := in.Sandbox.GetLinux().GetSecurityContext().GetSelinuxOptions()
	if isEmptySELinux(opts) {
		opts = pod
	}
	for _, o := range []*runtimeapi.SELinuxOption{opts, pod} {
		if l := o.GetLevel(); l != "" && !seLinuxLevelPattern.Get().MatchString(l) {
			return "", "", fmt.Errorf("the format of 'level' %q is not correct: %w", l, errdefs.ErrInvalidArgument)
		}
	}
	if !lsm.SELinuxEnabled() {
		return "", "", nil
	}
	for _, f := range []struct{ name, v string }{{"user", opts.GetUser()}, {"role", opts.GetRole()}, {"type", opts.GetType()}} {
		if f.v != "" && !seLinuxNamePattern.Get().MatchString(f.v) {
			return "", "", fmt.Errorf("selinux %s %q: %w", f.name, f.v, errdefs.ErrInvalidArgument)
		}
	}
	procCtx, fileCtx, err := lsm.SELinuxContainerContexts()
	if err != nil {
		return "", "", err
	}
	p, err := parseSELinuxContext(procCtx)
	if err != nil {
		return "", "", err
	}
	f, err := parseSELinuxContext(fileCtx)
	if err != nil {
		return "", "", err
	}
	level := opts.GetLevel()
	if level == "" {
		level = pod.GetLevel()
	}
	if level == "" {
		if level, err = podMCSLevel(in.SandboxDir); err != nil {
			return "", "", err
		}
	}
	if u := opts.GetUser(); u != "" {
		p[0], f[0] = u, u
	}
	if r := opts.GetRole(); r != "" {
		p[1] = r
	}
	if t := opts.GetType(); t != "" {
		p[2] = t
	}
	p[3], f[3] = level, level
	mount = strings.Join(f[:], ":")
	if privileged {
		return "", mount, nil
	}
	return strings.Join(p[:], ":"), mount, nil
}

func isEmptySELinux(o *runtimeapi.SELinuxOption) bool {
	return o.GetUser() == "" && o.GetRole() == "" && o.GetType() == "" && o.GetLevel() == ""
}

// parseSELinuxContext splits user:role:type[:level] (the level may hold ':' itself).
func parseSELinuxContext(c string) ([4]string, error) {
	var out [4]string
	parts := strings.SplitN(c, ":", 4)
	if len(parts) < 3 {
		return out, fmt.Errorf("selinux context %q is not user:role:type[:level]: %w", c, errdefs.ErrFailedPrecondition)
	}
	copy(out[:], parts)
	return out, nil
}

// seLinuxLevelFile holds, in the pod's folder, the MCS level the pod was given.
const seLinuxLevelFile = "selinux-level"

// mcsCategories is the number of MCS categories a level's pair is drawn from (c0 to c1023).
const mcsCategories = 1024

// podMCSMu keeps two pods from drawing the same pair at once.
var podMCSMu sync.Mutex

// podMCSLevel is the pod's own level, "s0:cA,cB", drawn at random the first time among the pairs no
// other pod of this runtime holds and kept in the pod's folder, so its containers made later, or
// after a restart of the daemon, get the same.
func podMCSLevel(sandboxDir string) (string, error) {
	if sandboxDir == "" {
		return "", fmt.Errorf("selinux: the pod has no folder to keep its MCS level in: %w", errdefs.ErrFailedPrecondition)
	}
	podMCSMu.Lock()
	defer podMCSMu.Unlock()
	path := filepath.Join(sandboxDir, seLinuxLevelFile)
	if l, err := readMCSLevel(path); err == nil {
		return l, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	used := map[string]bool{}
	others, err := filepath.Glob(filepath.Join(filepath.Dir(sandboxDir), "*", seLinuxLevelFile))
	if err != nil {
		return "", err
	}
	for _, o := range others {
		if l, err := readMCSLevel(o); err == nil {
			used[l] = true
		}
	}
	for range 1000 {
		a, err := rand.Int(rand.Reader, big.NewInt(mcsCategories))
		if err != nil {
			return "", err
		}
		b, err := rand.Int(rand.Reader, big.NewInt(mcsCategories))
		if err != nil {
			return "", err
		}
		x, y := a.Int64(), b.Int64()
		if x == y {
			continue
		}
		l := fmt.Sprintf("s0:c%d,c%d", min(x, y), max(x, y))
		if used[l] {
			continue
		}
		if err := atomicfile.Write(path, []byte(l), 0o600); err != nil {
			return "", fmt.Errorf("selinux: keep the pod's MCS level: %w", err)
		}
		return l, nil
	}
	return "", fmt.Errorf("selinux: no free MCS level for the pod: %w", errdefs.ErrResourceExhausted)
}

func readMCSLevel(path string) (string, error) {
	b, err := readHostFile(path, 64)
	if err != nil {
		return "", err
	}
	l := strings.TrimSpace(string(b))
	if !seLinuxLevelPattern.Get().MatchString(l) {
		return "", fmt.Errorf("%s: %q is not an MCS level: %w", path, l, errdefs.ErrFailedPrecondition)
	}
	return l, nil
}

var hostSELinuxEnabled = sync.OnceValue(func() bool {
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/selinux", &st); err != nil || uint32(st.Type) != uint32(unix.SELINUX_MAGIC) {
		return false
	}
	// A kernel with SELinux built in but no policy loaded labels everything "kernel".
	b, err := readHostFile("/proc/self/attr/current", 4096)
	return err == nil && strings.TrimRight(string(b), "\x00\n") != "kernel"
})

func (hostModules) SELinuxEnabled() bool { return hostSELinuxEnabled() }

// SELinuxContainerContexts reads the loaded policy's lxc_contexts, where policies that support
// containers (container-selinux) name the process and file contexts of container processes.
func (hostModules) SELinuxContainerContexts() (process, file string, err error) {
	cfg, err := readHostFile("/etc/selinux/config", 64<<10)
	if err != nil {
		return "", "", fmt.Errorf("selinux: %w", err)
	}
	policy := selinuxConfigValue(string(cfg), "SELINUXTYPE")
	if policy == "" || strings.ContainsAny(policy, "/\x00") || policy == "." || policy == ".." {
		return "", "", fmt.Errorf("selinux: /etc/selinux/config names no usable SELINUXTYPE (%q): %w", policy, errdefs.ErrFailedPrecondition)
	}
	path := filepath.Join("/etc/selinux", policy, "contexts", "lxc_contexts")
	b, err := readHostFile(path, 64<<10)
	if err != nil {
		return "", "", fmt.Errorf("selinux: the policy has no container contexts (install container-selinux): %w", err)
	}
	process, file = selinuxConfigValue(string(b), "process"), selinuxConfigValue(string(b), "file")
	if process == "" || file == "" {
		return "", "", fmt.Errorf("selinux: %s names no process or file context: %w", path, errdefs.ErrFailedPrecondition)
	}
	return process, file, nil
}

// selinuxConfigValue finds `key = value` (or key=value, the value maybe quoted) in a policy file.
func selinuxConfigValue(text, key string) string {
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok || strings.TrimSpace(k) != key {
			continue
		}
		return strings.Trim(strings.TrimSpace(v), `"`)
	}
	return ""
}
