package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
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

// RemoveCgroupRoot removes a cgroup root (such as an agent's --cgroup-root) and everything below
// it from every mounted hierarchy: the v1 controllers, the unified one, or the v2 root.
func RemoveCgroupRoot(root string) {
	for _, base := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		RemoveCgroupTree(filepath.Join(base, root))
		ents, _ := os.ReadDir(base)
		for _, e := range ents {
			RemoveCgroupTree(filepath.Join(base, e.Name(), root))
		}
	}
}
