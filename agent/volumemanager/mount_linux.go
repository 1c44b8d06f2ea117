package volumemanager

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
)

type kernelMounter struct{}

func (kernelMounter) MountTmpfs(target string, size int64, mode os.FileMode) error {
	opts := "mode=" + strconv.FormatUint(uint64(kernelMode(mode)), 8)
	if size > 0 {
		opts += ",size=" + strconv.FormatInt(size, 10)
	}
	return unix.Mount("tmpfs", target, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts)
}

// kernelMode is mode as chmod(2) reads it: Go keeps the setuid, setgid and sticky bits apart
// from the permission bits.
func kernelMode(mode os.FileMode) uint32 {
	m := uint32(mode.Perm())
	if mode&os.ModeSetuid != 0 {
		m |= unix.S_ISUID
	}
	if mode&os.ModeSetgid != 0 {
		m |= unix.S_ISGID
	}
	if mode&os.ModeSticky != 0 {
		m |= unix.S_ISVTX
	}
	return m
}

func (kernelMounter) MountHugetlbfs(target, pageSize string) error {
	return unix.Mount("nodev", target, "hugetlbfs", unix.MS_NOSUID|unix.MS_NODEV, "pagesize="+pageSize)
}

func (kernelMounter) ResizeTmpfs(target string, size int64) error {
	return unix.Mount("tmpfs", target, "tmpfs", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, "size="+strconv.FormatInt(size, 10))
}

func (kernelMounter) BindFd(fdPath, target string) error {
	return unix.Mount(fdPath, target, "", unix.MS_BIND, "")
}

func (kernelMounter) Unmount(target string) error {
	err := unix.Unmount(target, unix.UMOUNT_NOFOLLOW)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil // not a mount point (any more)
	}
	return err
}

func (kernelMounter) IsMountPoint(path string) (bool, error) { return isMountRoot(path) }

func (kernelMounter) MountPoints(dir string) ([]string, error) {
	real, err := filepath.EvalSymlinks(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	infos, err := mountinfo.GetMounts(func(i *mountinfo.Info) (skip, stop bool) {
		return !(i.Mountpoint == real || len(i.Mountpoint) > len(real) && i.Mountpoint[:len(real)+1] == real+"/"), false
	})
	if err != nil {
		return nil, err
	}
	// A path mounted over twice is listed twice, so unmounting each entry uncovers it fully.
	var out []string
	for _, i := range infos {
		out = append(out, i.Mountpoint)
	}
	sort.Slice(out, func(a, b int) bool { return len(out[a]) > len(out[b]) })
	return out, nil
}
