package volumemanager

import (
	"fmt"
	"os"

	v1 "k8s.io/api/core/v1"
)

// setUpEmptyDir makes the folder; for medium Memory it mounts a tmpfs there once, sized by
// sizeLimit (else the kernel's default of half the RAM), so the pod's writes count against memory
// and vanish with the pod.
func (m *Manager) setUpEmptyDir(pod *v1.Pod, v *v1.Volume) error {
	dir := m.EmptyDirPath(pod.UID, v.Name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	// World-writable as the kubelet makes it, so containers running as any user can write.
	if err := os.Chmod(dir, 0o777); err != nil {
		return err
	}
	if v.EmptyDir.Medium != v1.StorageMediumMemory {
		return nil
	}
	mps, err := m.mounter().MountPoints(dir)
	if err != nil {
		return err
	}
	for _, mp := range mps {
		if mp == dir {
			return nil
		}
	}
	var size int64
	if v.EmptyDir.SizeLimit != nil {
		size = v.EmptyDir.SizeLimit.Value()
	}
	if err := m.mounter().MountTmpfs(dir, size); err != nil {
		return fmt.Errorf("tmpfs: %w", err)
	}
	return nil
}
