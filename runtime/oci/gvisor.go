package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// A gVisor pod is one runsc sandbox: one Sentry (gVisor's kernel) holds every container of the
// pod, as gVisor's own CRI integration does it. runsc tells the sandbox's first container (the
// "root" one, whose ID is the sandbox's) from the others by two annotations CRI runtimes set:
// io.kubernetes.cri.container-type (sandbox or container) and io.kubernetes.cri.sandbox-id (the
// root container's ID). What that means here:
//
//   - The pod's root container is catatonit -P on an empty read-only rootfs, created when the pod
//     is (after CNI set up its network namespace, which runsc copies into the Sentry's network
//     stack with --network=sandbox, taking the addresses off the host side), in the pod's cgroup.
//     It runs as a plain detached process of the daemon, not under conmon: its exit is the end of
//     the sandbox, which the pod's record notices by pid and start time as for catatonit.
//   - Each CRI container is a subcontainer: runsc start starts a gofer for its rootfs and the
//     Sentry starts its process in the sandbox, with the stdio of whoever ran runsc start.
//   - PID namespaces inside the Sentry are matched by the path in the spec: two containers whose
//     PID namespace names the same path share one. The path is only a key here (nothing is
//     opened at it): the pod's namespace is named after the pod dir, a container's own after its
//     bundle, so a pod sharing its PID namespace, and a debug container targeting another, work as
//     with runc.
//   - conmon waits for its container's init as its child and hands it its stdio at create. A
//     subcontainer's process lives in the Sentry, runsc reports the sandbox's pid for it and gives
//     it the stdio of runsc start, so conmon runs runsc through a small wrapper
//     (GvisorWaitWrapper) whose `create` leaves a waiter behind: a child of conmon holding the
//     container's stdio that runs runsc start when StartContainer tells it through a fifo in the
//     bundle (StartThroughGate), then `runsc wait`, and exits with the container's exit status.
//     conmon then logs, records the exit code and exits as it does for runc.

// Annotations runsc reads to place a container in a sandbox.
const (
	GvisorContainerType = "io.kubernetes.cri.container-type"
	GvisorSandboxID     = "io.kubernetes.cri.sandbox-id"
)

// GvisorStartGate is the fifo in a gVisor subcontainer's bundle on which its waiter waits.
const GvisorStartGate = "start-gate"

// GvisorPlacement places a container in its pod's gVisor sandbox.
type GvisorPlacement struct {
	SandboxID string // the pod's root container, whose ID is the sandbox's
	// PodPIDKey names the pod's PID namespace (that of the root container) in the Sentry, ""
	// when the pod shares none; OwnPIDKey names this container's own; TargetPIDKey a debug
	// target's (NamespaceMode TARGET).
	PodPIDKey, OwnPIDKey, TargetPIDKey string
	// Hostname is the container's hostname when the pod has no UTS namespace of its own (a
	// host-network pod): the Sentry has its own UTS namespace and learns it only from the spec.
	Hostname string
}

func (g *GvisorPlacement) annotate(a map[string]string) {
	a[GvisorContainerType] = "container"
	a[GvisorSandboxID] = g.SandboxID
}

// gvisorUnknownCaps are the capabilities newer than this runsc (Linux 5.8 and 5.9): runsc fails
// to create a container whose spec names one ("cannot read client sync file"), and the Sentry has
// nothing they would allow. A privileged container, or one adding ALL, gets them from the host's
// list.
var gvisorUnknownCaps = map[string]bool{"CAP_PERFMON": true, "CAP_BPF": true, "CAP_CHECKPOINT_RESTORE": true}

// dropUnknownCaps removes gvisorUnknownCaps from every capability set of the process.
func (g *GvisorPlacement) dropUnknownCaps(p *specs.Process) {
	c := p.Capabilities
	if c == nil {
		return
	}
	for _, set := range []*[]string{&c.Bounding, &c.Effective, &c.Inheritable, &c.Permitted, &c.Ambient} {
		// A new slice: the sets may share one array.
		var kept []string
		for _, name := range *set {
			if !gvisorUnknownCaps[name] {
				kept = append(kept, name)
			}
		}
		*set = kept
	}
}

func (g *GvisorPlacement) setHostname(s *specs.Spec) {
	if s.Hostname == "" {
		s.Hostname = g.Hostname
	}
}

// setPIDNamespace replaces the spec's PID namespace with the Sentry's key for the container's
// mode: the pod's when the container asks for it and the pod shares one (as runc's pods do), a
// target's, or its own. The host's PID namespace (NODE) does not exist inside the Sentry: such a
// container gets the pod's when there is one, the widest view a gVisor sandbox has.
func (g *GvisorPlacement) setPIDNamespace(s *specs.Spec, o *runtimeapi.NamespaceOption) {
	key := g.OwnPIDKey
	switch o.GetPid() {
	case runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_NODE:
		if g.PodPIDKey != "" {
			key = g.PodPIDKey
		}
	case runtimeapi.NamespaceMode_TARGET:
		key = g.TargetPIDKey
	}
	ns := s.Linux.Namespaces[:0]
	for _, n := range s.Linux.Namespaces {
		if n.Type != specs.PIDNamespace {
			ns = append(ns, n)
		}
	}
	s.Linux.Namespaces = append(ns, specs.LinuxNamespace{Type: specs.PIDNamespace, Path: key})
}

// GvisorPodPIDKey names a pod's PID namespace inside its sandbox; podDir is the pod's own dir.
func GvisorPodPIDKey(podDir string) string { return filepath.Join(podDir, "pidns") }

// GvisorOwnPIDKey names a container's own PID namespace inside its pod's sandbox.
func GvisorOwnPIDKey(bundle string) string { return filepath.Join(bundle, "pidns") }

// GvisorInfra is what a pod's root container is made of.
type GvisorInfra struct {
	ID        string // the sandbox's ID: runsc names the sandbox after its root container
	Bundle    string // a private dir for config.json and the empty rootfs
	Catatonit string // the host's catatonit (static), bound read-only into the rootfs
	NetNSPath string // the pod's network namespace; "" for a host-network pod
	Hostname  string
	// CgroupsPath is where runsc puts the sandbox and its gofers: below the pod's cgroup, so the
	// pod's limits bound all the pod's containers together, Sentry included.
	CgroupsPath string
	PIDKey      string
	// Network is runsc's --network for the sandbox: sandbox (gVisor's own stack in the pod's
	// namespace) or host (a host-network pod).
	Network string
}

// WriteGvisorInfra writes the root container's bundle: an empty read-only rootfs with catatonit
// bound in, and the sandbox annotations.
func WriteGvisorInfra(in GvisorInfra) error {
	if in.Catatonit == "" {
		return errors.New("catatonit is not configured: a gVisor pod's root container runs it")
	}
	rootfs := filepath.Join(in.Bundle, "rootfs")
	if err := os.MkdirAll(rootfs, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(rootfs, "catatonit"), nil, 0o500); err != nil {
		return err
	}
	ns := []specs.LinuxNamespace{
		{Type: specs.PIDNamespace, Path: in.PIDKey},
		{Type: specs.MountNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
	}
	if in.NetNSPath != "" {
		ns = append(ns, specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: in.NetNSPath})
	}
	s := &specs.Spec{
		Version:  ociVersion,
		Root:     &specs.Root{Path: rootfs, Readonly: true},
		Hostname: in.Hostname,
		Process: &specs.Process{
			Args:            []string{"/catatonit", "-P"},
			Env:             []string{defaultPath},
			Cwd:             "/",
			NoNewPrivileges: true,
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
			{Destination: "/catatonit", Type: "bind", Source: in.Catatonit, Options: []string{"rbind", "ro"}},
		},
		Annotations: map[string]string{GvisorContainerType: "sandbox", GvisorSandboxID: in.ID},
		Linux:       &specs.Linux{CgroupsPath: in.CgroupsPath, Namespaces: ns, Resources: &specs.LinuxResources{}},
	}
	return WriteBundle(in.Bundle, s)
}

// StartGvisorSandbox creates and starts the sandbox from the bundle WriteGvisorInfra wrote, and
// returns the sandbox process's pid. The sandbox is nobody's child here: `runsc create` forks it
// and exits, so it outlives the daemon (as conmon does for containers).
func (r *Runtime) StartGvisorSandbox(ctx context.Context, in GvisorInfra) (int, error) {
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer devnull.Close()
	// A file, never a pipe: the sandbox inherits runsc's stdio and would hold a pipe open.
	errPath := filepath.Join(in.Bundle, "create.err")
	errf, err := os.OpenFile(errPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	defer errf.Close()
	pidFile := filepath.Join(in.Bundle, "pid")
	args := append(r.GlobalArgs(), "--network="+in.Network, "create", "--bundle", in.Bundle, "--pid-file", pidFile, in.ID)
	cmd := exec.CommandContext(ctx, r.cgroupBinary(), args...)
	cmd.Dir = in.Bundle
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, errf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Run(); err != nil {
		msg, _ := os.ReadFile(errPath)
		return 0, fmt.Errorf("runsc create of the pod sandbox: %w: %s", err, bytes.TrimSpace(tail(msg, 4096)))
	}
	if err := r.startGvisorRoot(ctx, in); err != nil {
		return 0, err
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// startGvisorRoot runs `runsc start` of the root container. With --network=sandbox, that command
// joins the pod's network namespace, copies its interfaces into the Sentry, and first refuses to
// run in the host's namespace, which it tells by /proc/sys/net/core/rmem_default existing: only
// the initial namespace had it up to Linux 6.x, every namespace has it since (runsc of this era
// then refuses every pod). So it runs in a mount namespace of its own where /proc/sys/net is an
// empty tmpfs; runsc reads nothing else there, and the pod's namespace is never the host's (the
// runtime makes it).
func (r *Runtime) startGvisorRoot(ctx context.Context, in GvisorInfra) error {
	args := r.GlobalArgs()
	if in.Network != "" {
		args = append(args, "--network="+in.Network)
	}
	args = append(args, "start", in.ID)
	cmd := exec.CommandContext(ctx, r.Path, args...)
	if in.Network == "sandbox" {
		const script = "mount -t tmpfs -o size=4k,mode=555 nodelet-no-net-sysctl /proc/sys/net && exec \"$0\" \"$@\""
		cmd = exec.CommandContext(ctx, "unshare", append([]string{"--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, r.Path}, args...)...)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("runsc start of the pod sandbox: %w: %s", err, bytes.TrimSpace(tail(stderr.Bytes(), 4096)))
	}
	return nil
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// GvisorWaitWrapper writes (idempotently) the wrapper conmon runs in place of runsc for gVisor
// subcontainers, and returns its path. conmon calls it as
//
//	wrapper --root ROOT [ARGS] create --bundle BUNDLE --pid-file PIDFILE [...] ID
//
// with the container's stdio (conmon's pipes, or /dev/null with a terminal). It runs runsc's
// create, then leaves a waiter in the background and puts the waiter's pid in the pid file, in
// place of the sandbox's that runsc wrote. The waiter is orphaned when the wrapper exits and so
// becomes conmon's child (conmon is a subreaper). It keeps the container's stdio, because runsc
// of this era gives a subcontainer the stdio of `runsc start`, not of create: so the waiter is
// the one that starts the container. It holds the start gate open (read and write, so opening it
// never blocks and the daemon's write always finds a reader) and reads one word from it: on
// "start" it runs runsc's start (whose stderr, the container's, gets runsc's complaints, so they
// land in the container's log), records its exit status in start.status and says so on the
// start-done fifo; on anything else (the container is removed unstarted) it
// does not start it. Then it lets go of the stdio, asks runsc for the container's exit status
// and exits with it; when runsc cannot tell (never started, the sandbox is gone) it exits 255.
func GvisorWaitWrapper(dir, runscPath string) (string, error) {
	if strings.ContainsAny(runscPath, "'\n") {
		return "", fmt.Errorf("runtime path %q cannot be quoted", runscPath)
	}
	script := `#!/bin/sh
runsc='` + runscPath + `'
bundle= pidfile= id= prev= create= n=$#
for a do
	case $prev in
	--bundle) bundle=$a ;;
	--pid-file) pidfile=$a ;;
	esac
	[ "$a" = create ] && create=1
	prev=$a id=$a
done
[ -n "$create" ] || exec "$runsc" "$@"
"$runsc" "$@" || exit
[ -p "$bundle/` + GvisorStartGate + `" ] || exit 0
# Keep only the global arguments (those before create) in "$@".
for a do
	[ "$a" = create ] && break
	set -- "$@" "$a"
done
shift $n
exec 3<>"$bundle/` + GvisorStartGate + `" 4<>"$bundle/` + gvisorStartDone + `" 5<&0 || exit
# sh gives a background list /dev/null as its stdin: the container's comes back from fd 5.
(
	exec 0<&5 5<&-
	read -r verb <&3
	exec 3<&-
	if [ "$verb" = start ]; then
		"$runsc" "$@" start "$id"
		echo $? > "$bundle/start.status.tmp"
		mv "$bundle/start.status.tmp" "$bundle/start.status"
	fi
	echo done >&4
	exec 4>&- </dev/null >/dev/null 2>&1
	out=$("$runsc" "$@" wait "$id" 2>/dev/null)
	code=${out##*'"exitStatus":'}
	code=${code%%[!0-9]*}
	exit "${code:-255}"
) &
echo $! > "$pidfile"
`
	return installScript(dir, filepath.Base(runscPath)+"-wait.sh", script)
}

// gvisorStartDone is the fifo on which the waiter says it ran runsc's start.
const gvisorStartDone = "start-done"

// MakeStartGate makes the fifos through which a gVisor subcontainer's waiter is told to start it
// (or not) and says it did.
func MakeStartGate(bundle string) error {
	for _, f := range []string{GvisorStartGate, gvisorStartDone} {
		if err := unix.Mkfifo(filepath.Join(bundle, f), 0o600); err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
	}
	return nil
}

// StartThroughGate has a gVisor subcontainer's waiter run runsc's start, with the container's
// stdio, and returns its outcome.
func StartThroughGate(ctx context.Context, bundle string) error {
	done, err := os.OpenFile(filepath.Join(bundle, gvisorStartDone), os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer done.Close()
	_ = os.Remove(filepath.Join(bundle, "start.status"))
	gate, err := os.OpenFile(filepath.Join(bundle, GvisorStartGate), os.O_WRONLY|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("the container's monitor is gone: %w", errdefs.ErrFailedPrecondition)
	}
	if err != nil {
		return err
	}
	_, err = gate.Write([]byte("start\n"))
	gate.Close()
	if err != nil {
		return err
	}
	fds := []unix.PollFd{{Fd: int32(done.Fd()), Events: unix.POLLIN}}
	for {
		ms := 1000
		if dl, ok := ctx.Deadline(); ok {
			ms = max(1, min(ms, int(time.Until(dl).Milliseconds())))
		}
		n, err := unix.Poll(fds, ms)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n > 0 {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// conmon ends with its waiter: a waiter that died without answering ends the wait.
		if pid := ConmonPIDOf(bundle); pid > 0 && errors.Is(unix.Kill(pid, 0), unix.ESRCH) {
			return fmt.Errorf("runsc start: the container's monitor exited before the container started: %w", errdefs.ErrFailedPrecondition)
		}
	}
	b, err := os.ReadFile(filepath.Join(bundle, "start.status"))
	if err != nil {
		return fmt.Errorf("runsc start: no outcome recorded: %w", err)
	}
	if code := strings.TrimSpace(string(b)); code != "0" {
		return fmt.Errorf("runsc start: exit status %s (its message is in the container's log)", code)
	}
	return nil
}

// OpenStartGate lets a gVisor subcontainer's waiter go on to wait for the container's exit: after
// runsc start, or when the container will never start (removed while created). It is idempotent:
// with no waiter left (no reader), or no gate, there is nothing to do.
func OpenStartGate(bundle string) error {
	f, err := os.OpenFile(filepath.Join(bundle, GvisorStartGate), os.O_WRONLY|unix.O_NONBLOCK, 0)
	if errors.Is(err, unix.ENXIO) || errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write([]byte("go\n"))
	if errors.Is(err, unix.EPIPE) || errors.Is(err, unix.EAGAIN) {
		return nil
	}
	return err
}
