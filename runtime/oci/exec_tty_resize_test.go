package oci

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// resizeExecTTY sets the size on the pseudo-terminal the exec'd process holds as stdin, and on
// nothing else: not on a stdin that is not a terminal, not for a pid file it cannot trust.
func TestResizeExecTTY(t *testing.T) {
	master, slave, err := openPTY()
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	start := func(stdin *os.File) *exec.Cmd {
		cmd := exec.Command("sleep", "1000")
		cmd.Stdin = stdin
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	size := func() unix.Winsize {
		var ws *unix.Winsize
		if err := ptyControl(master, func(fd int) (err error) { ws, err = unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); return err }); err != nil {
			t.Fatal(err)
		}
		return *ws
	}

	onPTY := start(slave)
	slave.Close()
	os.WriteFile(pidFile, []byte(strconv.Itoa(onPTY.Process.Pid)+"\n"), 0o600)
	resizeExecTTY(pidFile, TermSize{Width: 91, Height: 17})
	if ws := size(); ws.Col != 91 || ws.Row != 17 {
		t.Fatalf("size %dx%d, want 91x17", ws.Col, ws.Row)
	}

	// A stdin that is a pipe is left alone (and the pty keeps its size).
	r, w, _ := os.Pipe()
	defer w.Close()
	onPipe := start(r)
	r.Close()
	os.WriteFile(pidFile, []byte(strconv.Itoa(onPipe.Process.Pid)), 0o600)
	resizeExecTTY(pidFile, TermSize{Width: 1, Height: 1})
	// A pid file far beyond any pid is not read.
	os.WriteFile(pidFile, []byte(strings.Repeat("1", 4096)), 0o600)
	resizeExecTTY(pidFile, TermSize{Width: 2, Height: 2})
	if ws := size(); ws.Col != 91 || ws.Row != 17 {
		t.Errorf("size %dx%d after resizes that should not apply, want 91x17", ws.Col, ws.Row)
	}
	var st unix.Stat_t
	if unix.Fstat(int(w.Fd()), &st) != nil || isPTY(&st) {
		t.Error("a pipe taken for a terminal")
	}
}
