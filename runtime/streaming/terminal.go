package streaming

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// openPTY makes a pseudo-terminal pair. Neither end becomes this process's controlling terminal.
func openPTY() (master, slave *os.File, err error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("unlock pty: %w", err)
	}
	// TIOCGPTPEER opens the peer through the master itself, immune to a /dev/pts swapped under us.
	sfd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCGPTPEER,
		uintptr(unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC))
	if errno != 0 {
		master.Close()
		return nil, nil, fmt.Errorf("open pty peer: %w", errno)
	}
	return master, os.NewFile(sfd, "pty-peer"), nil
}

// SetSize sets a terminal's window size; the kernel then signals SIGWINCH to its foreground job.
func SetSize(tty *os.File, size TerminalSize) error {
	return unix.IoctlSetWinsize(int(tty.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: size.Height, Col: size.Width})
}

// RunWithTerminal runs cmd with a fresh pseudo-terminal as its stdin, stdout, stderr and
// controlling terminal, copies stdin to it and its output to stdout, applies resize events, and
// waits for cmd. stdout is closed when the terminal has drained.
//
// This is how `runc exec -t` (and crun's) is meant to be driven in the foreground: the runtime
// finds a terminal on its own stdio, proxies it to the container's terminal, and copies the size
// over on each SIGWINCH, which the kernel sends it when SetSize changes our side.
//
// When ctx ends, kill is called (nil kills cmd's process) and ctx's error is returned.
func RunWithTerminal(ctx context.Context, cmd *exec.Cmd, stdin io.Reader, stdout io.WriteCloser,
	resize <-chan TerminalSize, kill func()) error {
	master, slave, err := openPTY()
	if err != nil {
		return err
	}
	defer master.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Setctty = true
	cmd.SysProcAttr.Ctty = 0 // the child's fd 0
	// A size before start saves the runtime a resize round-trip; later sizes follow by SIGWINCH.
	select {
	case size, ok := <-resize:
		if ok {
			_ = SetSize(master, size)
		}
	default:
	}
	err = cmd.Start()
	slave.Close() // the child has its copy; EIO on the master then means the terminal is done
	if err != nil {
		return err
	}
	if kill == nil {
		kill = func() { _ = cmd.Process.Kill() }
	}

	var wg sync.WaitGroup
	if stdin != nil {
		go func() { _, _ = io.Copy(master, stdin) }() // ends with the client or the master
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(stdout, master) // EIO once every holder of the slave exited
		if stdout != nil {
			stdout.Close()
		}
	}()
	stopResize, resizeDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(resizeDone)
		for {
			select {
			case <-stopResize:
				return
			case size, ok := <-resize:
				if !ok {
					return
				}
				_ = SetSize(master, size)
			}
		}
	}()
	// Runs before master.Close (defers unwind in reverse), so no ioctl can hit a closed fd.
	defer func() { close(stopResize); <-resizeDone }()

	waitc := make(chan error, 1)
	go func() { waitc <- cmd.Wait() }()
	select {
	case err = <-waitc:
	case <-ctx.Done():
		kill()
		<-waitc
		err = ctx.Err()
	}
	wg.Wait()
	return err
}

// ExitCode extracts the exit code of a finished command; ok is false for other errors.
func ExitCode(err error) (code int, ok bool) {
	if err == nil {
		return 0, true
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return ee.ExitCode(), true
	}
	return -1, false
}
