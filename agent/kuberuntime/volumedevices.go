package kuberuntime

import (
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// makeVolumeDevices maps the block volumes a container names in volumeDevices to the devices
// the runtime creates in it, as the kubelet's makeBlockVolumes: the claim's device node at the
// device path, read, write and mknod, or read only for a claim read-only. The volume manager
// set the claims up and checked their volumeMode; the node is checked again here so that a
// folder can never be passed as a device.
func (m *Manager) makeVolumeDevices(pod *v1.Pod, c *v1.Container) ([]*runtimeapi.Device, error) {
	var out []*runtimeapi.Device
	for _, d := range c.VolumeDevices {
		if !filepath.IsAbs(d.DevicePath) {
			return nil, fmt.Errorf("error DevicePath `%s` must be an absolute path", d.DevicePath)
		}
		var vol *v1.Volume
		for i := range pod.Spec.Volumes {
			if pod.Spec.Volumes[i].Name == d.Name {
				vol = &pod.Spec.Volumes[i]
			}
		}
		path, readOnly, ok := "", false, false
		if vol != nil && (vol.PersistentVolumeClaim != nil || vol.Ephemeral != nil) && m.Volumes != nil {
			path, readOnly, ok = m.Volumes.ClaimPath(pod, d.Name)
		}
		if !ok {
			return nil, fmt.Errorf("cannot find volume %q to pass into container %q", d.Name, c.Name)
		}
		st, err := os.Stat(path)
		if err != nil || st.Mode()&os.ModeDevice == 0 || st.Mode()&os.ModeCharDevice != 0 {
			return nil, fmt.Errorf("volumeDevices: volume %q: %s is not a block device", d.Name, path)
		}
		perms := "mrw"
		if readOnly {
			perms = "r"
		}
		out = append(out, &runtimeapi.Device{HostPath: path, ContainerPath: d.DevicePath, Permissions: perms})
	}
	return out, nil
}
