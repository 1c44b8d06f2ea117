package csi

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/nodelet/nodelet/agent/internal/podpath"
)

// statsTimeout bounds one NodeGetVolumeStats: the summary waits for it, so a driver that hangs
// costs a scrape this much, not the two minutes a stage may take.
const statsTimeout = 10 * time.Second

// VolumeStats is a published volume as its driver measures it (NodeGetVolumeStats), as the
// kubelet's CSI metrics provider asks it, for a filesystem or a raw block volume alike: path is
// where SetUp published it. nil for a driver without GET_VOLUME_STATS, whose volumes the kubelet
// does not measure either.
func (m *Manager) VolumeStats(ctx context.Context, path string) (*statsapi.FsStats, error) {
	dataDir, staging := filepath.Dir(path), ""
	if filepath.Dir(dataDir) == m.blockDir("publish") {
		pv := filepath.Base(dataDir)
		if err := podpath.Element("PV name", pv); err != nil {
			return nil, err
		}
		dataDir, staging = m.blockDir(pv, "data"), m.blockDir("staging", pv)
	} else if filepath.Base(path) != "mount" {
		return nil, fmt.Errorf("%s is no CSI volume's publish path", path)
	}
	data, err := loadVolData(dataDir)
	if err != nil {
		return nil, err
	}
	if err := validDriver(data.DriverName); err != nil {
		return nil, err
	}
	if staging == "" {
		staging = filepath.Join(m.globalDir(data.DriverName, data.VolumeHandle), "globalmount")
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
	if !caps[csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME] {
		staging = ""
	}
	resp, err := c.node.NodeGetVolumeStats(ctx, &csipb.NodeGetVolumeStatsRequest{VolumeId: data.VolumeHandle,
		VolumePath: path, StagingTargetPath: staging})
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
