package cri_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

// faultRuntime is a fault-injecting OCI runtime, as containerd's integration/failpoint puts
// faults into a real runtime without changing the daemon: a wrapper of the real runc whose first
// `create` fails ("fail") or blocks for ever in open(2) of a FIFO no one writes ("hang"), after
// writing its PID to Tripped. Every other call, later creates included, goes to runc.
type faultRuntime struct {
	Path    string // the wrapper, to use as a handler's binary
	Tripped string // holds the PID of the faulting call once it happened
}

func newFaultRuntime(t *testing.T, mode string) *faultRuntime {
	t.Helper()
	dir := t.TempDir()
	never := filepath.Join(dir, "never")
	if err := unix.Mkfifo(never, 0o600); err != nil {
		t.Fatal(err)
	}
	f := &faultRuntime{Path: filepath.Join(dir, "runc"), Tripped: filepath.Join(dir, "tripped")}
	var fault string
	switch mode {
	case "fail":
		fault = `echo "injected runtime failure" >&2; exit 1`
	case "hang":
		fault = fmt.Sprintf(`read _ < %q`, never)
	default:
		t.Fatalf("fault mode %q", mode)
	}
	script := fmt.Sprintf(`#!/bin/sh
for a in "$@"; do
	if [ "$a" = create ] && mkdir %[1]q 2>/dev/null; then
		echo $$ > %[2]q.tmp && mv %[2]q.tmp %[2]q
		%[3]s
	fi
done
exec %[4]q "$@"
`, filepath.Join(dir, "once"), f.Tripped, fault, testutil.LookPath("runc"))
	if err := os.WriteFile(f.Path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

// waitTripped waits (bounded, for a hung test) until the fault happened and returns the PID of
// the faulting call.
func (f *faultRuntime) waitTripped(t *testing.T) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if b, err := os.ReadFile(f.Tripped); err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatal(err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatal("the runtime's create was never called")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// gone reports whether pid has exited (or is a zombie awaiting its reaper).
func gone(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	return err != nil || containsZombie(b)
}
