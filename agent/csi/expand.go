package csi

import (
	"context"
	"errors"
	"path/filepath"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Expand grows the pod's published volume to size bytes on the node (NodeExpandVolume), as the
// kubelet does once the controller has grown it: false when the driver does not expand on the
// node (nothing to do there).
func (m *Manager) Expand(ctx context.Context, uid types.UID, volume string, pv *v1.PersistentVolume, size int64) (bool, error) {
	if pv.Spec.CSI == nil {
		return false, nil
	}
	dir, err := m.targetDir(string(uid), volume)
	if err != nil {
		return false, err
	}
	data, err := loadVolData(dir)
	if err != nil {
		return false, err
	}
	if err := validDriver(data.DriverName); err != nil {
		return false, err
	}
	c, err := m.client(data.DriverName)
	if err != nil {
		return false, errors.New(logf("Expander.NodeExpand failed to get CSI client: %v", err))
	}
	defer c.close()
	caps, err := c.capabilities(ctx)
	if err != nil {
		return false, errors.New(logf("Expander.NodeExpand failed to check if node supports expansion : %v", err))
	}
	if !caps[csipb.NodeServiceCapability_RPC_EXPAND_VOLUME] {
		return false, nil
	}
	staging := ""
	if caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		staging = filepath.Join(m.globalDir(data.DriverName, data.VolumeHandle), "globalmount")
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := c.node.NodeExpandVolume(ctx, &csipb.NodeExpandVolumeRequest{VolumeId: data.VolumeHandle,
		VolumePath: filepath.Join(dir, "mount"), StagingTargetPath: staging, CapacityRange: &csipb.CapacityRange{RequiredBytes: size},
		VolumeCapability: &csipb.VolumeCapability{AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{
			FsType: pv.Spec.CSI.FSType, MountFlags: pv.Spec.MountOptions}},
			AccessMode: &csipb.VolumeCapability_AccessMode{Mode: accessMode(pv.Spec.AccessModes)}}}); err != nil {
		return false, errors.New(logf("Expander.NodeExpand failed to expand the volume : %v", err))
	}
	return true, nil
}
