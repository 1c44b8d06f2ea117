package volumemanager

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/internal/podpath"
)

// ErrBadSubPath: a subPath that is absolute, climbs with "..", or resolves outside its volume.
var ErrBadSubPath = errors.New("invalid subPath")

// SubPathDir is where the bind mount of one volumeMount's subPath goes.
func (m *Manager) SubPathDir(pod *v1.Pod, volume, container string, index int) (string, error) {
	return podpath.SubPathDir(m.RootDir, pod.UID, volume, container, index)
}

// SubPath returns a host path that holds exactly volumeHostPath/subPath for the runtime to mount.
//
// A plain join would be resolved later by the runtime, following any symlink a container planted
// in the volume — that is how CVE-2017-1002101 and CVE-2021-25741 let a pod mount the host's root.
// So the path is opened here, resolved inside the volume only (os.Root refuses to leave it, through
// symlinks or ".."), and the opened file itself — not its name — is bind mounted from /proc/self/fd
// onto a private mount point: swapping a component for a symlink after the check changes nothing.
// A missing subPath is made as a folder, as upstream. Idempotent per (volume, container, index)
// while the subPath names the same file; bound anew when it was replaced.
func (m *Manager) SubPath(pod *v1.Pod, container string, index int, volume, volumeHostPath, subPath string) (string, error) {
	if err := validSubPath(subPath); err != nil {
		return "", err
	}
	target, err := m.SubPathDir(pod, volume, container, index)
	if err != nil {
		return "", err
	}
	podDir, err := m.PodDir(pod.UID)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(podpath.PodsDir(m.RootDir), 0o750); err != nil {
		return "", err
	}
	if err := privateDir(podDir); err != nil {
		return "", err
	}
	root, err := os.OpenRoot(volumeHostPath)
	if err != nil {
		return "", fmt.Errorf("volume %q: %w", volume, err)
	}
	defer root.Close()
	if _, err := root.Lstat(subPath); errors.Is(err, os.ErrNotExist) {
		// Made with the volume's own mode, special bits included, as the kubelet makes it: under
		// an fsGroup the folder must be group-writable and setgid as its volume is.
		vi, err := root.Stat(".")
		if err != nil {
			return "", fmt.Errorf("volume %q: %w", volume, err)
		}
		mode := vi.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)
		if err := root.MkdirAll(subPath, mode.Perm()); err != nil {
			return "", fmt.Errorf("subPath %q of volume %q: %w", subPath, volume, errors.Join(ErrBadSubPath, err))
		}
		if err := root.Chmod(subPath, mode); err != nil {
			return "", fmt.Errorf("subPath %q of volume %q: %w", subPath, volume, errors.Join(ErrBadSubPath, err))
		}
	}
	// Not O_PATH: os.Root would then hand back a final symlink itself rather than follow it.
	// O_NONBLOCK keeps a FIFO from blocking the open.
	f, err := root.OpenFile(subPath, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("subPath %q of volume %q: %w", subPath, volume, errors.Join(ErrBadSubPath, err))
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return "", err
	}
	if mounted, err := m.mounter().IsMountPoint(target); err != nil {
		return "", err
	} else if mounted {
		var cur unix.Stat_t
		if err := unix.Stat(target, &cur); err == nil && cur.Dev == st.Dev && cur.Ino == st.Ino {
			return target, nil
		}
		// The volume's file was replaced since it was bound (a configMap or secret update swaps
		// the atomic writer's files): as the kubelet, a restarted container gets the new one.
		if err := m.mounter().Unmount(target); err != nil {
			return "", fmt.Errorf("subPath %q of volume %q: unbind the replaced file: %w", subPath, volume, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		return "", err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		err = os.Mkdir(target, 0o750)
	} else {
		var t *os.File
		t, err = os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o640)
		if t != nil {
			t.Close()
		}
	}
	if err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	if err := m.mounter().BindFd("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), target); err != nil {
		return "", fmt.Errorf("bind subPath %q of volume %q: %w", subPath, volume, err)
	}
	return target, nil
}

func validSubPath(p string) error {
	if p == "" || filepath.IsAbs(p) {
		return fmt.Errorf("subPath %q: %w", p, ErrBadSubPath)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return fmt.Errorf("subPath %q must not contain '..': %w", p, ErrBadSubPath)
		}
	}
	return nil
}
