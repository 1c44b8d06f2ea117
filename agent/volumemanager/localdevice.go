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

// markDeviceUse records on disk that the pod uses the PV's device mount: an empty folder
// pods/<uid>/volumes/kubernetes.io~local-volume/<pv>, where the kubelet binds the mount. What the
// markers say survives the agent, so that a pod deleted while the agent was down still releases
// the mount, and one still running keeps it. Callers hold devMu.
func (m *Manager) markDeviceUse(uid types.UID, pv string) error {
	dir, err := podpath.PluginDir(m.RootDir, uid, localVolumePlugin)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if err := os.Mkdir(filepath.Join(dir, pv), 0o750); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}

const localVolumePlugin = "kubernetes.io~local-volume"

// releaseLocalDevices unmounts the device filesystems the pod held that no other pod's folder
// still marks, once the pod's containers are gone.
func (m *Manager) releaseLocalDevices(uid types.UID) error {
	dir, err := podpath.PluginDir(m.RootDir, uid, localVolumePlugin)
	if err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	m.devMu.Lock()
	defer m.devMu.Unlock()
	var errs []error
	for _, e := range ents {
		pv := e.Name()
		if err := os.Remove(filepath.Join(dir, pv)); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		if m.deviceMarkedElsewhere(pv) {
			continue
		}
		target := filepath.Join(m.localDeviceMounts(), pv)
		if err := m.unmountAll(target); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deviceMarkedElsewhere: some pod's folder still marks the PV's device mount as used.
func (m *Manager) deviceMarkedElsewhere(pv string) bool {
	pods, _ := os.ReadDir(filepath.Join(m.RootDir, "pods"))
	for _, p := range pods {
		dir, err := podpath.PluginDir(m.RootDir, types.UID(p.Name()), localVolumePlugin)
		if err != nil {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, pv)); err == nil {
			return true
		}
	}
	return false
}
