package oci

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/nodelet/nodelet/internal/atomicfile"
	"github.com/nodelet/nodelet/internal/cgroupfs"
	"github.com/nodelet/nodelet/runtime/internal/lockedthread"
)

// crun (1.8) refuses to run on a hybrid cgroup host whose v2 hierarchy holds any controller
// ("cgroups in hybrid mode not supported"), which is this kind of machine: hugetlb is bound to
// v2 because no v1 hierarchy mounts it. Rather than change the host's cgroup layout, crun runs in
// its own mount namespace where /sys/fs/cgroup/unified is an empty tmpfs (the change stays in that
// namespace: /sys/fs/cgroup is made private there first). crun then manages the v1 hierarchies as
// on a legacy host; the containers' own mount namespaces are made from it and never see the host's
// /sys/fs/cgroup anyway.

// NeedsHybridWrapper reports whether runtimePath is crun on such a host.
func NeedsHybridWrapper(runtimePath string) bool {
	if filepath.Base(runtimePath) != "crun" {
		return false
	}
	return len(cgroupfs.Host().HybridControllers()) > 0
}

// HybridWrapper writes (idempotently) the wrapper script for runtimePath into dir and returns its
// path, to be used in place of the runtime binary for every verb.
func HybridWrapper(dir, runtimePath string) (string, error) {
	if strings.ContainsAny(runtimePath, "'\n") {
		return "", fmt.Errorf("runtime path %q cannot be quoted", runtimePath)
	}
	script := "#!/bin/sh\n" +
		"exec unshare --mount --propagation unchanged -- /bin/sh -c '" +
		"mount --make-rprivate /sys/fs/cgroup && " +
		"mount -t tmpfs -o size=64k,mode=755 nodelet-no-cgroup2 /sys/fs/cgroup/unified && " +
		": > /sys/fs/cgroup/unified/cgroup.controllers && " +
		"exec \"$0\" \"$@\"' '" + runtimePath + "' \"$@\"\n"
	return installScript(dir, filepath.Base(runtimePath)+"-hybrid.sh", script)
}

// installScript writes a wrapper script into dir (made 0700: only root runs what is in it),
// unless it is there already with that content. The file is replaced, never rewritten in place:
// a conmon may be executing the old one.
func installScript(dir, name, script string) (string, error) {
	path := filepath.Join(dir, name)
	if b, err := os.ReadFile(path); err == nil && string(b) == script {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	return path, atomicfile.Write(path, []byte(script), 0o700)
}

// startHidingUnified starts cmd in the mount namespace HybridWrapper's script makes, from a
// thread of this process instead of five processes: the thread leaves the filesystem context
// (cwd, root) it shares with the others and takes a copy of the mount namespace, makes
// /sys/fs/cgroup private in it and hides the v2 hierarchy under an empty tmpfs; cmd, forked from
// that thread, starts there. The thread ends with the call (lockedthread).
func startHidingUnified(cmd *exec.Cmd) error {
	return lockedthread.Run(func() error {
		if err := unix.Unshare(unix.CLONE_FS | unix.CLONE_NEWNS); err != nil {
			return fmt.Errorf("own mount namespace for the OCI runtime: %w", err)
		}
		if err := unix.Mount("", "/sys/fs/cgroup", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("make /sys/fs/cgroup private: %w", err)
		}
		if err := unix.Mount("nodelet-no-cgroup2", "/sys/fs/cgroup/unified", "tmpfs", 0, "size=64k,mode=755"); err != nil {
			return fmt.Errorf("hide /sys/fs/cgroup/unified: %w", err)
		}
		fd, err := unix.Open("/sys/fs/cgroup/unified/cgroup.controllers", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o444)
		if err != nil {
			return fmt.Errorf("hide /sys/fs/cgroup/unified: %w", err)
		}
		unix.Close(fd)
		return cmd.Start()
	})
}
