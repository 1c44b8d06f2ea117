package volumemanager

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/internal/podpath"
)

// setUpEmptyDir makes the folder; for medium Memory it mounts a tmpfs there once, sized by
// sizeLimit (else the kernel's default of half the RAM), so the pod's writes count against memory
// and vanish with the pod; for HugePages media, a hugetlbfs of the pod's huge page size, whose
// pages the pod cgroup's hugetlb limit pays for.
func (m *Manager) setUpEmptyDir(pod *v1.Pod, v *v1.Volume) error {
	parent, err := m.pluginDir(pod.UID, podpath.EmptyDirPlugin)
	if err != nil {
		return err
	}
	if err := podpath.Element("volume name", v.Name); err != nil {
		return err
	}
	dir := filepath.Join(parent, v.Name)
	if err := os.Mkdir(dir, 0o750); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	// World-writable as the kubelet makes it, so containers running as any user can write; the
	// 0750 folders above keep other users of the host out.
	if err := os.Chmod(dir, 0o777); err != nil {
		return err
	}
	medium := v.EmptyDir.Medium
	if medium != v1.StorageMediumMemory && !isHugePagesMedium(medium) {
		return own(dir, true, fsGroup(pod))
	}
	if mounted, err := m.isMountPoint(dir); err != nil || mounted {
		if err == nil {
			err = own(dir, true, fsGroup(pod))
		}
		return err
	}
	if isHugePagesMedium(medium) {
		size, err := hugePageSize(medium, pod)
		if err != nil {
			return err
		}
		if err := m.mounter().MountHugetlbfs(dir, size.String()); err != nil {
			return fmt.Errorf("hugetlbfs: %w", err)
		}
		return own(dir, true, fsGroup(pod))
	}
	var size int64
	if v.EmptyDir.SizeLimit != nil {
		size = v.EmptyDir.SizeLimit.Value()
	}
	// 1777, the root of a tmpfs mounted with no mode= as the kubelet mounts it: everyone may
	// write, only a file's owner may remove it.
	if err := m.mounter().MountTmpfs(dir, size, 0o777|os.ModeSticky); err != nil {
		return fmt.Errorf("tmpfs: %w", err)
	}
	return own(dir, true, fsGroup(pod))
}

// isMountPoint reports whether dir itself is mounted on.
func (m *Manager) isMountPoint(dir string) (bool, error) {
	return m.mounter().IsMountPoint(dir)
}
