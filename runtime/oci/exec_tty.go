package oci

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/internal/regularfile"
	"github.com/nodelet/nodelet/runtime/internal/pidfd"
)

// TermSize is a terminal's size in characters.
type TermSize struct {
	Width, Height uint16
}

// ExecTTY runs p in the container on a pseudo-terminal and waits for it, returning its exit code;
// ctx's end kills it.
//
// The runtimes hand a terminal's master end over a console socket only when they detach, which
// would lose the exit code. So the runtime runs attached, with an outer terminal made here as its
// controlling tty and stdio: it allocates the container's terminal and relays between the two,
// and it passes size changes on (SIGWINCH, which the kernel sends it when the outer size changes).
// stdin is copied to the outer master, everything read from it goes to stdout.
func (r *Runtime) ExecTTY(ctx context.Context, id, bundle string, p *specs.Process, stdin io.Reader, stdout io.Writer, resize <-chan TermSize) (int, error) {
	pc := *p
	pc.Terminal = true
	// Clients send the terminal's size right after connecting. Waiting for it (a second at most,
	// for a client that never sends one) lets the runtime create the terminal with that size
	// (process.consoleSize) before the process runs, instead of 0x0 and a resize a moment later
	// that a program reading its size once would miss.
	var first *TermSize
	if resize != nil {
		select {
		case sz, ok := <-resize:
			if ok {
				first = &sz
				pc.ConsoleSize = &specs.Box{Height: uint(sz.Height), Width: uint(sz.Width)}
			} else {
				resize = nil
			}
		case <-time.After(time.Second):
		}
	}
	dir, err := os.MkdirTemp(bundle, ".exec-")
	if err != nil {
		return -1, err
	}
	defer os.RemoveAll(dir)
	procFile, pidFile := filepath.Join(dir, "process.json"), filepath.Join(dir, "pid")
	if err := writeJSON(procFile, &pc); err != nil {
		return -1, err
	}
	master, slave, err := openPTY()
	if err != nil {
		return -1, err
	}
	defer master.Close()
	if first != nil {
		setSize(master, *first) // the runtime copies it on SIGWINCH; keep the outer one in step
	}
	cmd := exec.Command(r.verbBinary("exec"), append(r.GlobalArgs(), r.execArgs(id, procFile, pidFile, r.ttyFlag()...)...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	err = r.start(cmd, "exec")
	slave.Close() // the runtime holds it now; the master reads EIO once every holder is gone
	if err != nil {
		return -1, err
	}
	var waitErr error
	exited := make(chan struct{})
	go func() { waitErr = cmd.Wait(); close(exited) }()

	if stdin != nil {
		go func() { _, _ = io.Copy(master, stdin) }()
	}
	outDone := make(chan struct{})
	go func() {
		_, _ = io.Copy(stdout, master)
		close(outDone)
	}()
	// The resizer ends before the master is closed (defers run in reverse).
	stopResize, resizerDone := make(chan struct{}), make(chan struct{})
	defer func() { close(stopResize); <-resizerDone }()
	go func() {
		defer close(resizerDone)
		for {
			select {
			case <-stopResize:
				return
			case sz, ok := <-resize:
				if !ok {
					return
				}
				setSize(master, sz)
				resizeExecTTY(pidFile, sz)
			}
		}
	}()
	select {
	case <-exited:
	case <-ctx.Done():
		r.stopExec(cmd, id, pidFile, exited)
		return -1, ctx.Err()
	}
	select {
	case <-outDone:
	case <-time.After(2 * time.Second): // a daemonized child still holds the terminal: stop reading
	}
	var ee *exec.ExitError
	if errors.As(waitErr, &ee) {
		return ee.ExitCode(), nil
	}
	if waitErr != nil {
		return -1, waitErr
	}
	return 0, nil
}

// openPTY makes a raw pseudo-terminal pair.
func openPTY() (master, slave *os.File, err error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	var n uint32
	err = ptyControl(m, func(fd int) error {
		if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
			return fmt.Errorf("unlock pty: %w", err)
		}
		var err error
		n, err = unix.IoctlGetUint32(fd, unix.TIOCGPTN)
		return err
	})
	if err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("pty: %w", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	// Raw: the outer terminal only carries bytes; echo and line editing are the inner one's job.
	if t, err := unix.IoctlGetTermios(int(s.Fd()), unix.TCGETS); err == nil {
		t.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
		t.Oflag &^= unix.OPOST
		t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
		t.Cflag &^= unix.CSIZE | unix.PARENB
		t.Cflag |= unix.CS8
		t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
		_ = unix.IoctlSetTermios(int(s.Fd()), unix.TCSETS, t)
	}
	return m, s, nil
}

// ptyControl runs f on the file's fd without File.Fd, which would switch the fd to blocking mode
// and leave a reader stuck past Close.
func ptyControl(f *os.File, fn func(fd int) error) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

func setSize(master *os.File, sz TermSize) {
	_ = ptyControl(master, func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: sz.Height, Col: sz.Width})
	})
}

// resizeExecTTY sets sz on the exec'd process's own terminal (its stdin: the container side of
// the terminal the runtime made). runc passes a size change of the outer terminal on to it, crun
// 1.8 does not; set here too, the process gets its one SIGWINCH either way (the kernel signals
// only a change). The PID is the runtime's pid file's; it must still hold a pseudo-terminal on
// stdin once its pidfd is open, so a PID reused meanwhile by a process without one is left alone.
func resizeExecTTY(pidFile string, sz TermSize) {
	b, err := regularfile.Read(pidFile, 32)
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return
	}
	var tty *os.File
	p, err := pidfd.Open(pid, func(pid int) bool {
		// The process is the container's to arrange: its stdin may be any file or device it
		// holds. Only a pseudo-terminal is opened (opening some devices does something), and the
		// check is made again on what was opened, in case stdin changed in between.
		fd0 := "/proc/" + strconv.Itoa(pid) + "/fd/0"
		var st unix.Stat_t
		if unix.Stat(fd0, &st) != nil || !isPTY(&st) {
			return false
		}
		f, err := os.OpenFile(fd0, os.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
		if err != nil {
			return false
		}
		if unix.Fstat(int(f.Fd()), &st) != nil || !isPTY(&st) {
			f.Close()
			return false
		}
		tty = f
		return true
	})
	if err != nil || p == nil {
		return
	}
	p.Close()
	defer tty.Close()
	_ = unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: sz.Height, Col: sz.Width})
}

// isPTY reports whether st is a pseudo-terminal slave: a character device of major 136 to 143.
func isPTY(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFCHR && unix.Major(st.Rdev) >= 136 && unix.Major(st.Rdev) <= 143
}

// ttyFlag: runc and crun want --tty besides the process's terminal field; runsc has no such
// flag and reads the field.
func (r *Runtime) ttyFlag() []string {
	if r.sandboxed() {
		return nil
	}
	return []string{"--tty"}
}
