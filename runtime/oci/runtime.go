package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	utilversion "k8s.io/apimachinery/pkg/util/version"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// Runtime is one OCI runtime binary with its own state dir: runc, crun and runsc share the CLI
// verbs used here (create through conmon, start, state, kill, delete, update, exec).
type Runtime struct {
	Path string
	Root string   // --root
	Args []string // extra global arguments
	// CgroupPath, when set, replaces Path for the verbs that create, change or join cgroups
	// (create, update, exec, delete): see HybridWrapper. With HideUnified the daemon runs those
	// verbs itself from a thread that hides the v2 hierarchy, and only conmon uses CgroupPath.
	CgroupPath string
	// HideUnified starts the cgroup verbs the daemon runs from a thread whose mount namespace
	// hides the v2 hierarchy, as HybridWrapper's script does, without its five processes.
	HideUnified bool
	// MonitorPath, when set, is what conmon runs in place of the runtime: see GvisorWaitWrapper.
	MonitorPath string
}

func (r *Runtime) cgroupBinary() string {
	if r.CgroupPath != "" {
		return r.CgroupPath
	}
	return r.Path
}

func (r *Runtime) monitorBinary() string {
	if r.MonitorPath != "" {
		return r.MonitorPath
	}
	return r.cgroupBinary()
}

// GlobalArgs come before the verb on every invocation.
func (r *Runtime) GlobalArgs() []string {
	return append([]string{"--root", r.Root}, r.Args...)
}

// cgroupVerb reports whether verb creates, changes or joins cgroups.
func cgroupVerb(verb string) bool {
	switch verb {
	case "create", "update", "exec", "delete":
		return true
	}
	return false
}

// verbBinary is what the daemon runs for verb.
func (r *Runtime) verbBinary(verb string) string {
	if cgroupVerb(verb) && !r.HideUnified {
		return r.cgroupBinary()
	}
	return r.Path
}

// start starts cmd, which runs verb.
func (r *Runtime) start(cmd *exec.Cmd, verb string) error {
	if r.HideUnified && cgroupVerb(verb) {
		return startHidingUnified(cmd)
	}
	return cmd.Start()
}

func (r *Runtime) command(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, r.verbBinary(args[0]), append(r.GlobalArgs(), args...)...)
}

// run executes a verb and returns its stdout; the error carries the runtime's stderr, which is
// the only place it explains itself.
func (r *Runtime) run(ctx context.Context, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := r.command(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := r.start(cmd, args[0])
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		msg := bytes.TrimSpace(stderr.Bytes())
		if len(msg) > 4096 {
			msg = msg[len(msg)-4096:]
		}
		return stdout.Bytes(), fmt.Errorf("%s %s: %w: %s", filepath.Base(r.Path), args[0], err, msg)
	}
	return stdout.Bytes(), nil
}

// State is what the runtime knows of a container.
type State struct {
	Status string `json:"status"` // creating, created, running, paused, stopped
	Pid    int    `json:"pid"`
}

// State asks the runtime; a container it does not know wraps errdefs.ErrNotFound.
func (r *Runtime) State(ctx context.Context, id string) (*State, error) {
	out, err := r.run(ctx, nil, "state", id)
	if err != nil {
		if !r.exists(id) {
			return nil, fmt.Errorf("%v: %w", err, errdefs.ErrNotFound)
		}
		return nil, err
	}
	var st State
	if err := json.Unmarshal(out, &st); err != nil {
		return nil, fmt.Errorf("runtime state of %s: %w", id, err)
	}
	return &st, nil
}

// exists tells whether the runtime still keeps state for id. runc and crun keep a dir per
// container under their root; runsc keeps files named after it.
func (r *Runtime) exists(id string) bool {
	if _, err := os.Stat(filepath.Join(r.Root, id)); err == nil {
		return true
	}
	m, _ := filepath.Glob(filepath.Join(r.Root, "*"+id+"*"))
	return len(m) > 0
}

// Start runs the created container's process.
func (r *Runtime) Start(ctx context.Context, id string) error {
	if r.sandboxed() {
		return r.startSandboxed(ctx, id)
	}
	_, err := r.run(ctx, nil, "start", id)
	return err
}

// startSandboxed runs runsc's start with its output in a file: starting a container in a gVisor
// sandbox starts the container's gofer, which inherits runsc's stdio and would hold a pipe open
// for the container's life.
func (r *Runtime) startSandboxed(ctx context.Context, id string) error {
	errf, err := os.CreateTemp("", "runsc-start-")
	if err != nil {
		return err
	}
	defer os.Remove(errf.Name())
	defer errf.Close()
	cmd := r.command(ctx, "start", id)
	cmd.Stderr = errf
	if err := cmd.Run(); err != nil {
		msg, _ := os.ReadFile(errf.Name())
		return fmt.Errorf("%s start: %w: %s", filepath.Base(r.Path), err, bytes.TrimSpace(tail(msg, 4096)))
	}
	return nil
}

// Kill signals the container's init, or every process in it when all is set.
func (r *Runtime) Kill(ctx context.Context, id string, sig syscall.Signal, all bool) error {
	args := []string{"kill"}
	if all {
		args = append(args, "--all")
	}
	_, err := r.run(ctx, nil, append(args, id, strconv.Itoa(int(sig)))...)
	return err
}

// Delete forgets a stopped container (and force-kills a live one). Deleting an unknown
// container succeeds, so Remove stays idempotent across daemon restarts.
func (r *Runtime) Delete(ctx context.Context, id string) error {
	if !r.exists(id) {
		return nil
	}
	_, err := r.run(ctx, nil, "delete", "--force", id)
	if err != nil && !r.exists(id) {
		return nil
	}
	return err
}

// Update changes a running container's resources.
func (r *Runtime) Update(ctx context.Context, id, bundle string, res *specs.LinuxResources) error {
	f, err := os.CreateTemp(bundle, ".update-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := json.NewEncoder(f).Encode(res); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	_, err = r.run(ctx, nil, "update", "--resources", f.Name(), id)
	return err
}

// ExecResult is a finished exec's exit code and whether its output was cut.
type ExecResult struct {
	ExitCode  int
	Truncated bool
}

// Exec runs p in the container and waits for it. When ctx ends first, the process is killed and
// the context's error is returned.
func (r *Runtime) Exec(ctx context.Context, id, bundle string, p *specs.Process, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	dir, err := os.MkdirTemp(bundle, ".exec-")
	if err != nil {
		return -1, err
	}
	defer os.RemoveAll(dir)
	procFile, pidFile := filepath.Join(dir, "process.json"), filepath.Join(dir, "pid")
	if err := writeJSON(procFile, p); err != nil {
		return -1, err
	}
	// Not CommandContext: on timeout the exec'd process must die, not only the runtime's
	// front process, whose SIGKILL it would not forward.
	cmd := exec.Command(r.verbBinary("exec"), append(r.GlobalArgs(), r.execArgs(id, procFile, pidFile)...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.WaitDelay = 2 * time.Second
	if err := r.start(cmd, "exec"); err != nil {
		return -1, err
	}
	var waitErr error
	done := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(done) }()
	select {
	case <-done:
		err := waitErr
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			return ee.ExitCode(), nil
		case errors.Is(err, exec.ErrWaitDelay):
			// The process ended but something it started still holds its output open: the
			// exit code stands, the rest of the output is not waited for.
			return cmd.ProcessState.ExitCode(), nil
		case err != nil:
			return -1, err
		}
		return 0, nil
	case <-ctx.Done():
		r.stopExec(cmd, id, pidFile, done)
		return -1, ctx.Err()
	}
}

// stopExec ends an exec whose time is up. The process itself is killed and the runtime's front
// process left to reap it and exit: killed first, the runtime would leave the process (or its
// zombie) to the container's init, which may never reap it. Only a runtime that hangs is killed.
func (r *Runtime) stopExec(cmd *exec.Cmd, id, pidFile string, exited <-chan struct{}) {
	if r.sandboxed() {
		// gVisor's processes live in its own kernel: the host pid is the sandbox's, so the
		// signal goes through the runtime, to the process's pid inside.
		if b, err := os.ReadFile(pidFile + ".internal"); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, _ = r.run(ctx, nil, "kill", "--pid", string(bytes.TrimSpace(b)), id, "9")
			cancel()
		}
	} else if !killPidFile(pidFile) {
		// No pid yet: the runtime forwards SIGTERM to the process it is starting.
		_ = cmd.Process.Signal(unix.SIGTERM)
	}
	select {
	case <-exited:
		return
	case <-time.After(5 * time.Second):
	}
	if !r.sandboxed() {
		killPidFile(pidFile)
	}
	_ = cmd.Process.Kill()
	<-exited
}

// sandboxed reports a runtime whose containers run under their own kernel (gVisor).
func (r *Runtime) sandboxed() bool { return filepath.Base(r.Path) == "runsc" }

// execArgs are the exec verb's arguments; the pid files let a timed-out exec be killed.
func (r *Runtime) execArgs(id, procFile, pidFile string, extra ...string) []string {
	args := append([]string{"exec"}, extra...)
	args = append(args, "--process", procFile, "--pid-file", pidFile)
	if r.sandboxed() {
		args = append(args, "--internal-pid-file", pidFile+".internal")
	}
	return append(args, id)
}

// killPidFile kills the exec'd process the runtime recorded; false when there is none yet.
func killPidFile(pidFile string) bool {
	if b, err := os.ReadFile(pidFile); err == nil {
		if pid, err := strconv.Atoi(string(bytes.TrimSpace(b))); err == nil && pid > 0 {
			_ = unix.Kill(pid, unix.SIGKILL)
			return true
		}
	}
	return false
}

// ReadSpec loads a bundle's config.json.
func ReadSpec(bundle string) (*specs.Spec, error) {
	data, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		return nil, err
	}
	var s specs.Spec
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// writeJSON writes an exec's process.json into the exec's fresh temp dir. No fsync, no rename: the
// file lives for one runtime call and is deleted after it, and no crash can make a reader see
// it half-written (the runtime only reads it after this returns). The synced atomic write it
// replaced cost one to three milliseconds of every exec.
func writeJSON(path string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// LimitedBuffer keeps the first Max bytes written to it and counts the rest, so a process that
// prints gigabytes costs the daemon at most Max bytes of memory and never blocks.
type LimitedBuffer struct {
	Max       int
	buf       bytes.Buffer
	Truncated bool
}

func (b *LimitedBuffer) Write(p []byte) (int, error) {
	if room := b.Max - b.buf.Len(); room > 0 {
		if len(p) > room {
			b.buf.Write(p[:room])
			b.Truncated = true
		} else {
			b.buf.Write(p)
		}
	} else if len(p) > 0 {
		b.Truncated = true
	}
	return len(p), nil
}

// Bytes is what was kept.
func (b *LimitedBuffer) Bytes() []byte { return b.buf.Bytes() }

// escape is a container escape fixed upstream: versions for which affected is true have it.
type escape struct {
	cves     []string
	affected func(v *utilversion.Version) bool
}

func below(v *utilversion.Version, fixed string) bool {
	return v.LessThan(utilversion.MustParseSemantic(fixed))
}

// knownEscapes lists, per runtime name, the container escapes of its upstream releases.
var knownEscapes = map[string][]escape{
	"runc": {
		{[]string{"CVE-2024-21626"}, func(v *utilversion.Version) bool { return below(v, "1.1.12") }},
		{[]string{"CVE-2025-31133", "CVE-2025-52565", "CVE-2025-52881"}, func(v *utilversion.Version) bool {
			switch {
			case below(v, "1.2.8"):
				return true
			case v.Major() == 1 && v.Minor() == 3:
				return below(v, "1.3.3")
			case v.Major() == 1 && v.Minor() == 4:
				return below(v, "1.4.0-rc.3")
			}
			return false
		}},
	},
	"crun": {
		{[]string{"CVE-2019-18837"}, func(v *utilversion.Version) bool { return below(v, "0.10.5") }},
		{[]string{"CVE-2022-27650"}, func(v *utilversion.Version) bool { return below(v, "1.4.4") }},
	},
}

// KnownEscapes reads the output of `<runtime> --version` ("runc version 1.1.5+ds1", "crun
// version 1.8.1") and returns the runtime's name and version and the CVEs of container escapes
// fixed in a later upstream release. Distributions backport such fixes without changing the
// upstream version, so the answer is a reason to check, not a verdict. An unknown runtime or
// an unreadable version gives no CVEs.
func KnownEscapes(versionOutput string) (name, ver string, cves []string) {
	line, _, _ := strings.Cut(strings.TrimSpace(versionOutput), "\n")
	f := strings.Fields(line)
	if len(f) < 3 || f[1] != "version" {
		return "", "", nil
	}
	name, ver = f[0], f[2]
	v, err := utilversion.ParseSemantic(ver)
	if err != nil {
		if v, err = utilversion.ParseGeneric(ver); err != nil {
			return name, ver, nil
		}
	}
	for _, e := range knownEscapes[name] {
		if e.affected(v) {
			cves = append(cves, e.cves...)
		}
	}
	return name, ver, cves
}

// WarnKnownEscapes asks the runtime binary at path for its version and logs a warning naming
// the container escapes its upstream version has. It is advice only: it never fails, and the
// daemon runs it in the background so that start does not wait for it.
func WarnKnownEscapes(ctx context.Context, path string, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		log.Warn("could not read the OCI runtime's version", "runtime", path, "err", err)
		return
	}
	name, ver, cves := KnownEscapes(string(out))
	if len(cves) == 0 {
		return
	}
	log.Warn("OCI runtime version has known container escapes; upgrade it unless your distribution backported the fixes (Debian's runc 1.1.5+ds1-1+deb12u* carries some: see its changelog)",
		"runtime", path, "name", name, "version", ver, "cves", strings.Join(cves, ","))
}
