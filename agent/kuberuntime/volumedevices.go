package kuberuntime

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// refuseVolumeDevices fails a container that asks for a block volume's raw device: the agent maps
// no block devices (the kubelet's block volume mappers need PersistentVolumes, which it cannot
// attach either), and starting the container without the device would not be what was asked.
func refuseVolumeDevices(c *v1.Container) error {
	if len(c.VolumeDevices) == 0 {
		return nil
	}
	d := c.VolumeDevices[0]
	return fmt.Errorf("volumeDevices: volume %q at %s: block volumes are not supported", d.Name, d.DevicePath)
}
