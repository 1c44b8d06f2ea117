package oci

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// Files conmon keeps in a container's bundle dir. The attach socket (SOCK_SEQPACKET) and the
// ctl fifo are what Attach and log reopening use; exit and oom are written when the container ends.
const (
	AttachSocket = "attach"
	CtlFifo      = "ctl"
	WinszFifo    = "winsz"
	ExitFile     = "exit"
	OOMFile      = "oom"
	ConmonPid    = "conmon.pid"
	ConmonLog    = "conmon.log"
)

// Monitor describes how one container is run under conmon.
type Monitor struct {
	ConmonPath string
	Runtime    *Runtime
	ID         string
	Bundle     string
	LogPath    string // CRI-format (k8s-file) log
	// LogSizeMax, when > 0, is conmon's --log-size-max: the log file never grows past it, even
	// while no agent rotates it (see logSizeArgs).
	LogSizeMax int64
	ExitDir    string // conmon writes <ExitDir>/<ID> holding the exit code
	Stdin      bool
	StdinOnce  bool
	Tty        bool
}

// Create starts conmon, which runs `runtime create` for the bundle and then stays as the
// container's parent: it holds stdio, writes the log, and records the exit code, independent of
// the daemon (it is in its own session, so a daemon killed with its process group spares it).
// It returns the container's init PID once the container exists in the "created" state.
func (m *Monitor) Create(ctx context.Context) (pid int, err error) {
	args := []string{
		"--api-version", "1",
		"-b", m.Bundle,
		"-c", m.ID,
		"-u", m.ID,
		"-n", m.ID,
		"-r", m.Runtime.monitorBinary(),
		"-p", filepath.Join(m.Bundle, "pidfile"),
		"-P", filepath.Join(m.Bundle, ConmonPid),
		"-l", "k8s-file:" + m.LogPath,
		"--exit-dir", m.ExitDir,
		"-0", m.Bundle,
		"--socket-dir-path", m.Bundle,
		"--full-attach",
		"--log-level", "error",
	}
	args = append(args, logSizeArgs(m.LogSizeMax)...)
	for _, a := range m.Runtime.GlobalArgs() {
		args = append(args, "--runtime-arg", a)
	}
	if m.Tty {
		args = append(args, "-t")
	}
	if m.Stdin {
		args = append(args, "-i")
		if !m.StdinOnce {
			args = append(args, "--leave-stdin-open")
		}
	}
	syncR, syncW, err := os.Pipe()
	if err != nil {
		return 0, err
	}
	defer syncR.Close()
	logf, err := os.OpenFile(filepath.Join(m.Bundle, ConmonLog), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		syncW.Close()
		return 0, err
	}
	defer logf.Close()
	cmd := exec.Command(m.ConmonPath, args...)
	cmd.Dir = m.Bundle
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{syncW}
	cmd.Env = append(os.Environ(), "_OCI_SYNCPIPE=3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Run() // conmon forks: its first process returns once the monitor is detached
	syncW.Close()
	if err != nil {
		return 0, fmt.Errorf("conmon: %w", err)
	}
	type syncMsg struct {
		Data    int    `json:"data"`
		Message string `json:"message"`
	}
	got := make(chan syncMsg, 1)
	fail := make(chan error, 1)
	go func() {
		var msg syncMsg
		if err := json.NewDecoder(syncR).Decode(&msg); err != nil {
			fail <- fmt.Errorf("conmon closed its sync pipe without a pid: %v (see %s)", err, filepath.Join(m.Bundle, ConmonLog))
			return
		}
		got <- msg
	}()
	select {
	case msg := <-got:
		if msg.Data <= 0 {
			return 0, fmt.Errorf("create container: %s", runtimeMessage(msg.Message))
		}
		return msg.Data, nil
	case err := <-fail:
		return 0, err
	case <-ctx.Done():
		m.KillConmon()
		return 0, ctx.Err()
	}
}

// logSizeArgs is the backstop against a container filling the disk while nobody rotates its log
// (the agent stopped, or a kubelet that does not rotate). conmon 2.1 counts what it wrote since it
// started; when the next entry would take the count past the cap it fsyncs, opens <log>.tmp
// truncated, renames it over the log and starts counting from zero. The old content is gone
// (readers holding it open finish it, as after a rotation), and the file stays below the cap (or
// one entry, at most 8 KiB, when the cap is smaller). The count is not reset when the agent
// rotates through ReopenContainerLog, so under rotation conmon also starts the live file afresh
// every cap bytes of output, dropping what the agent had not rotated yet: the cap belongs well
// above the agent's rotation size.
func logSizeArgs(max int64) []string {
	if max <= 0 {
		return nil
	}
	return []string{"--log-size-max", strconv.FormatInt(max, 10)}
}

// ConmonPIDOf reads the monitor's PID from its pidfile in bundle; 0 when unknown.
func ConmonPIDOf(bundle string) int {
	b, err := os.ReadFile(filepath.Join(bundle, ConmonPid))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// KillConmon kills the monitor of a container that never got going.
func (m *Monitor) KillConmon() {
	if pid := ConmonPIDOf(m.Bundle); pid > 0 {
		_ = unix.Kill(pid, unix.SIGKILL)
	}
}

// ReopenLog asks conmon to reopen the container's log file (after the kubelet rotated it).
func ReopenLog(bundle string) error {
	return writeCtl(bundle, 2, 0, 0)
}

// Resize tells conmon the terminal's new size.
func Resize(bundle string, height, width uint16) error {
	return writeCtl(bundle, 1, int(height), int(width))
}

func writeCtl(bundle string, kind, a, b int) error {
	// Non-blocking: with conmon gone, there is no reader and the open fails instead of hanging.
	f, err := os.OpenFile(filepath.Join(bundle, CtlFifo), os.O_WRONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("conmon control fifo: %v: %w", err, errdefs.ErrFailedPrecondition)
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "%d %d %d\n", kind, a, b)
	return err
}

// ReadExitFile reads the exit code conmon wrote and when; ok is false while there is none yet.
func ReadExitFile(path string) (code int, at time.Time, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, time.Time{}, false
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return 0, time.Time{}, false
	}
	code, err = strconv.Atoi(s)
	if err != nil {
		return 0, time.Time{}, false
	}
	st, err := os.Stat(path)
	if err != nil {
		return code, time.Now(), true
	}
	return code, st.ModTime(), true
}

// runtimeMessage shortens what a failed runtime printed to what a person needs: runc logs
// warnings before its error, and the error lines alone say what went wrong.
func runtimeMessage(m string) string {
	var errs []string
	for _, line := range strings.Split(strings.TrimSpace(m), "\n") {
		if strings.Contains(line, "level=error") {
			errs = append(errs, line)
		}
	}
	if len(errs) > 0 {
		return strings.Join(errs, "; ")
	}
	return strings.TrimSpace(m)
}
