package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nodelet/nodelet/internal/cgroupfs"
)

// StopGroup ends a daemon a test started: SIGTERM, then after grace SIGKILL to its whole process
// group (so cmd must have been started with Setpgid), and waits for it either way.
func StopGroup(cmd *exec.Cmd, grace time.Duration) {
	cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// KillProcessesMentioning SIGKILLs every process whose command line contains s. A runtime's shims
// and monitors outlive it by design and name its dir in their arguments, so this finds them.
func KillProcessesMentioning(s string) {
	for _, p := range ProcessesMentioning(s) {
		var pid int
		fmt.Sscan(p, &pid)
		if pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// UnmountUnder lazily unmounts every mount at or below dir, the deepest first.
func UnmountUnder(dir string) {
	mounts := MountsUnder(dir)
	for i := len(mounts) - 1; i >= 0; i-- {
		syscall.Unmount(mounts[i], syscall.MNT_DETACH)
	}
}

// RemoveCgroupTree removes the cgroup dir and every cgroup below it, the leaves first (rmdir is
// the only way to delete a cgroup, and it fails on one that still has children).
func RemoveCgroupTree(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if e.IsDir() {
			RemoveCgroupTree(filepath.Join(dir, e.Name()))
		}
	}
	os.Remove(dir)
}

// CgroupDirs are the folders of the cgroup rel in every mounted hierarchy (the v1 controllers'
// and the cgroup2 one, unified or not), as the runtime makes pod cgroups in them.
func CgroupDirs(rel string) []string {
	hs, err := cgroupfs.Hierarchies("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = filepath.Join(h.Path, rel)
	}
	return out
}

// RemoveCgroupRoot removes a cgroup root (such as an agent's --cgroup-root) and everything below
// it from every mounted hierarchy.
func RemoveCgroupRoot(root string) {
	for _, d := range CgroupDirs(root) {
		RemoveCgroupTree(d)
	}
}

// CgroupRootLeft lists where root still exists: what RemoveCgroupRoot could not remove.
func CgroupRootLeft(root string) []string {
	var left []string
	for _, d := range CgroupDirs(root) {
		if _, err := os.Stat(d); err == nil {
			left = append(left, d)
		}
	}
	return left
}

// RemoveCgroupRootOrFail removes root and fails the test when some of it is still there after
// the processes in it had time to go (a container still exiting keeps its cgroup busy).
func RemoveCgroupRootOrFail(t testing.TB, root string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		RemoveCgroupRoot(root)
		left := CgroupRootLeft(root)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("cgroup %s left behind: %v", root, left)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
