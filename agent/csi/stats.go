package csi

import (
	"context"
	"errors"
	"path/filepath"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// statsTimeout bounds one NodeGetVolumeStats: the summary waits for it, so a driver that hangs
// costs a scrape this much, not the two minutes a stage may take.
const statsTimeout = 10 * time.Second

// VolumeStats is the pod's published volume as its driver measures it (NodeGetVolumeStats), as
// the kubelet's CSI metrics provider asks it; nil for a driver without GET_VOLUME_STATS, whose
// volumes the kubelet does not measure either.
func (m *Manager) VolumeStats(ctx context.Context, uid types.UID, volume string) (*statsapi.FsStats, error) {
	dir, err := m.targetDir(string(uid), volume)
	if err != nil {
		return nil, err
	}
	data, err := loadVolData(dir)
	if err != nil {
		return nil, err
	}
	if err := validDriver(data.DriverName); err != nil {
		return nil, err
	}
	c, err := m.client(data.DriverName)
	if err != nil {
		return nil, err
	}
	defer c.close()
	ctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	caps, err := c.capabilities(ctx)
	if err != nil {
		return nil, err
	}
	if !caps[csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS] {
		return nil, nil
	}
	staging := ""
	if caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		staging = filepath.Join(m.globalDir(data.DriverName, data.VolumeHandle), "globalmount")
	}
	resp, err := c.node.NodeGetVolumeStats(ctx, &csipb.NodeGetVolumeStatsRequest{VolumeId: data.VolumeHandle,
		VolumePath: filepath.Join(dir, "mount"), StagingTargetPath: staging})
	if err != nil {
		return nil, errors.New(logf("NodeGetVolumeStats failed: rpc error: %v", err))
	}
	fs := &statsapi.FsStats{Time: metav1.Now()}
	for _, u := range resp.GetUsage() {
		total, avail, used := uint64(max(u.GetTotal(), 0)), uint64(max(u.GetAvailable(), 0)), uint64(max(u.GetUsed(), 0))
		switch u.GetUnit() {
		case csipb.VolumeUsage_BYTES:
			fs.CapacityBytes, fs.AvailableBytes, fs.UsedBytes = &total, &avail, &used
		case csipb.VolumeUsage_INODES:
			fs.Inodes, fs.InodesFree, fs.InodesUsed = &total, &avail, &used
		}
	}
	return fs, nil
}
