package oci

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// DefaultAppArmorProfile is the profile RuntimeDefault means where AppArmor is enforced; the
// runtime loads it the first time a container needs it.
const DefaultAppArmorProfile = "nodelet-default"

// defaultAppArmorPolicy is DefaultAppArmorProfile's policy: everything a container ordinarily
// does (files, network, capabilities it holds), but no mounting, no signals or tracing across
// its confinement, and no writes to the kernel's tunables in /proc and /sys, nor reads of its
// most sensitive files there.
const defaultAppArmorPolicy = `#include <tunables/global>

profile ` + DefaultAppArmorProfile + ` flags=(attach_disconnected,mediate_deleted) {
  #include <abstractions/base>

  file,
  network,
  capability,
  umount,

  signal (receive) peer=unconfined,
  signal (send,receive) peer=` + DefaultAppArmorProfile + `,
  ptrace (trace,read,tracedby,readby) peer=` + DefaultAppArmorProfile + `,

  deny mount,

  deny @{PROC}/* w,
  deny @{PROC}/sys/** w,
  deny @{PROC}/sysrq-trigger rwklx,
  deny @{PROC}/kcore rwklx,
  deny @{PROC}/kmem rwklx,
  deny @{PROC}/mem rwklx,
  deny /sys/** wklx,
  deny /sys/firmware/** rwklx,
  deny /sys/kernel/security/** rwklx,
}
`

// maxAppArmorProfileName is the longest profile name taken (PATH_MAX - 1, as the apiserver's bound).
const maxAppArmorProfileName = 4095

// appArmorFor is the container's process.apparmorProfile, as containerd chooses it. Where the
// kernel does not enforce AppArmor a profile other than unconfined is refused: running the
// container unconfined would be less than was asked. Where it does, no profile asked means
// RuntimeDefault; RuntimeDefault is nothing for a privileged container; a Localhost profile must
// already be loaded in the kernel.
func appArmorFor(sc *runtimeapi.LinuxContainerSecurityContext, privileged bool, lsm SecurityModules) (string, error) {
	p, err := requestedAppArmor(sc)
	if err != nil {
		return "", err
	}
	if !lsm.AppArmorEnabled() {
		if p != nil && p.GetProfileType() != runtimeapi.SecurityProfile_Unconfined {
			return "", fmt.Errorf("apparmor is not supported: the kernel does not enforce AppArmor, so profile %s cannot be applied: %w",
				appArmorName(p), errdefs.ErrFailedPrecondition)
		}
		return "", nil
	}
	if p == nil {
		p = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
	}
	switch p.GetProfileType() {
	case runtimeapi.SecurityProfile_Unconfined:
		return "", nil
	case runtimeapi.SecurityProfile_RuntimeDefault:
		if privileged {
			return "", nil
		}
		if err := ensureDefaultAppArmor(lsm); err != nil {
			return "", err
		}
		return DefaultAppArmorProfile, nil
	case runtimeapi.SecurityProfile_Localhost:
		name := strings.TrimPrefix(p.GetLocalhostRef(), "localhost/")
		loaded, err := lsm.AppArmorLoaded(name)
		if err != nil {
			return "", fmt.Errorf("apparmor profile %q: %w", name, err)
		}
		if !loaded {
			return "", fmt.Errorf("apparmor profile not found %s: load it on the host first (apparmor_parser -r <file>): %w",
				name, errdefs.ErrFailedPrecondition)
		}
		return name, nil
	}
	return "", fmt.Errorf("apparmor profile type %v: %w", p.GetProfileType(), errdefs.ErrInvalidArgument)
}

// requestedAppArmor is the request's profile: the apparmor field, else the deprecated string
// ("runtime/default", "unconfined", "localhost/<name>") older kubelets send. Nil: none asked.
func requestedAppArmor(sc *runtimeapi.LinuxContainerSecurityContext) (*runtimeapi.SecurityProfile, error) {
	p := sc.GetApparmor()
	if p == nil {
		switch s := sc.GetApparmorProfile(); {
		case s == "":
			return nil, nil
		case s == "runtime/default":
			p = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_RuntimeDefault}
		case s == "unconfined":
			p = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Unconfined}
		case strings.HasPrefix(s, "localhost/"):
			p = &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: strings.TrimPrefix(s, "localhost/")}
		default:
			return nil, fmt.Errorf("apparmor profile %q: %w", s, errdefs.ErrInvalidArgument)
		}
	}
	if p.GetProfileType() != runtimeapi.SecurityProfile_Localhost && p.GetLocalhostRef() != "" {
		return nil, fmt.Errorf("apparmor profile %v names a localhost profile %q: only Localhost profiles may: %w",
			p.GetProfileType(), p.GetLocalhostRef(), errdefs.ErrInvalidArgument)
	}
	if p.GetProfileType() == runtimeapi.SecurityProfile_Localhost {
		name := strings.TrimPrefix(p.GetLocalhostRef(), "localhost/")
		if strings.TrimSpace(name) == "" || len(name) > maxAppArmorProfileName || strings.ContainsAny(name, "\x00\n") {
			return nil, fmt.Errorf("apparmor localhost profile name %q: %w", name, errdefs.ErrInvalidArgument)
		}
	}
	return p, nil
}

func appArmorName(p *runtimeapi.SecurityProfile) string {
	if p.GetProfileType() == runtimeapi.SecurityProfile_Localhost {
		return "localhost/" + strings.TrimPrefix(p.GetLocalhostRef(), "localhost/")
	}
	return p.GetProfileType().String()
}

// defaultAppArmorMu makes concurrent creates load the default profile once.
var defaultAppArmorMu sync.Mutex

func ensureDefaultAppArmor(lsm SecurityModules) error {
	defaultAppArmorMu.Lock()
	defer defaultAppArmorMu.Unlock()
	loaded, err := lsm.AppArmorLoaded(DefaultAppArmorProfile)
	if err != nil {
		return fmt.Errorf("apparmor profile %s: %w", DefaultAppArmorProfile, err)
	}
	if loaded {
		return nil
	}
	if err := lsm.LoadAppArmor([]byte(defaultAppArmorPolicy)); err != nil {
		return fmt.Errorf("load apparmor profile %s: %w", DefaultAppArmorProfile, err)
	}
	return nil
}

// The kernel's AppArmor interfaces.
const (
	appArmorFS          = "/sys/kernel/security/apparmor"
	appArmorProfiles    = appArmorFS + "/profiles"
	appArmorEnabledFile = "/sys/module/apparmor/parameters/enabled"
	// maxAppArmorProfilesList bounds the profile list read: a few hundred profiles are tens of KiB.
	maxAppArmorProfilesList = 16 << 20
)

var hostAppArmorEnabled = sync.OnceValue(func() bool {
	if _, err := os.Stat(appArmorFS); err != nil {
		return false
	}
	b, err := readHostFile(appArmorEnabledFile, 64)
	return err == nil && len(b) > 1 && b[0] == 'Y'
})

func (hostModules) AppArmorEnabled() bool { return hostAppArmorEnabled() }

// AppArmorLoaded scans the kernel's list of loaded profiles ("<name> (<mode>)" lines).
func (hostModules) AppArmorLoaded(name string) (bool, error) {
	f, err := os.Open(appArmorProfiles)
	if err != nil {
		return false, err
	}
	defer f.Close()
	return profileListed(io.LimitReader(f, maxAppArmorProfilesList), name)
}

func profileListed(list io.Reader, name string) (bool, error) {
	sc := bufio.NewScanner(list)
	sc.Buffer(make([]byte, 0, 64<<10), maxAppArmorProfileName+64)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), name+" (") {
			return true, nil
		}
	}
	return false, sc.Err()
}

// LoadAppArmor hands the policy to apparmor_parser, which compiles it and loads it into the
// kernel, replacing a profile of the same name.
func (hostModules) LoadAppArmor(policy []byte) error {
	parser, err := exec.LookPath("apparmor_parser")
	if err != nil {
		for _, p := range []string{"/usr/sbin/apparmor_parser", "/sbin/apparmor_parser"} {
			if _, serr := os.Stat(p); serr == nil {
				parser, err = p, nil
				break
			}
		}
	}
	if err != nil {
		return fmt.Errorf("apparmor_parser is not installed (apt-get install apparmor): %w", errdefs.ErrFailedPrecondition)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, parser, "-Kr")
	cmd.Stdin = bytes.NewReader(policy)
	var out boundedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s -Kr: %v: %s", parser, err, strings.TrimSpace(out.String()))
	}
	return nil
}

// boundedBuffer keeps the first 4 KiB written to it: enough of a tool's error message.
type boundedBuffer struct{ b bytes.Buffer }

func (w *boundedBuffer) Write(p []byte) (int, error) {
	if room := 4096 - w.b.Len(); room > 0 {
		w.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (w *boundedBuffer) String() string { return w.b.String() }
