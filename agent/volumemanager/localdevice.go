package volumemanager

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	mountutils "k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"

	"github.com/nodelet/nodelet/agent/internal/podpath"
)

// localDeviceMounts is where the kubelet's local volume plugin mounts the filesystem of a local
// PV whose path is a block device, one folder per PV.
func (m *Manager) localDeviceMounts() string {
	return filepath.Join(m.RootDir, "plugins", "kubernetes.io", "local-volume", "mounts")
}

// mountLocalDevice makes a local PV of volumeMode Filesystem whose path is a block device a
// folder of the node, as the kubelet's local plugin does: the device's filesystem (made first
// when it has none: the PV's fsType, ext4 by default) mounted once per node at
// plugins/kubernetes.io/local-volume/mounts/<pv>, shared by every pod that claims it, read-only
// when the claim that mounts it is. Callers hold devMu.
func (m *Manager) mountLocalDevice(pv *v1.PersistentVolume, readOnly bool) (string, error) {
	if err := podpath.Element("PV name", pv.Name); err != nil {
		return "", err
	}
	target := filepath.Join(m.localDeviceMounts(), pv.Name)
	if mounted, err := m.mounter().IsMountPoint(target); err == nil && mounted {
		return target, nil
	}
	if err := os.MkdirAll(target, 0o750); err != nil {
		return "", err
	}
	fsType := ""
	if pv.Spec.Local.FSType != nil {
		fsType = *pv.Spec.Local.FSType
	}
	var opts []string
	if readOnly {
		opts = append(opts, "ro")
	}
	opts = append(opts, pv.Spec.MountOptions...)
	// mount-utils is the kubelet's own formatter: it formats only a device blkid finds empty, and
	// refuses one holding another filesystem than asked.
	safe := mountutils.NewSafeFormatAndMount(mountutils.New(""), utilexec.New())
	if err := safe.FormatAndMount(pv.Spec.Local.Path, target, fsType, opts); err != nil {
		os.Remove(target)
		return "", fmt.Errorf("local: failed to mount device %s at %s (fstype: %s), error %w", pv.Spec.Local.Path, target, fsType, err)
	}
	return target, nil
}

// releaseLocalDevices unmounts the device filesystems the pod held that no other pod of the
// node still claims, once the pod's containers are gone; the pod's claims of them are dropped.
func (m *Manager) releaseLocalDevices(uid types.UID) error {
	m.devMu.Lock()
	defer m.devMu.Unlock()
	m.mu.Lock()
	var unused []string
	for name, c := range m.claims[uid] {
		if !c.deviceMount {
			continue
		}
		delete(m.claims[uid], name)
		used := false
		for other, vols := range m.claims {
			for _, o := range vols {
				used = used || (other != uid && o.deviceMount && o.path == c.path)
			}
		}
		if !used {
			unused = append(unused, c.path)
		}
	}
	m.mu.Unlock()
	var errs []error
	for _, p := range unused {
		if err := m.unmountAll(p); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
