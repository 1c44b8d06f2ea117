package csi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/internal/podpath"
)

// Raw block volumes live where the kubelet's CSI block mapper keeps them, under
// <root>/plugins/kubernetes.io/csi/volumeDevices: staging/<pv> (the stage path), publish/<pv>/<pod
// UID> (a file the driver puts the device on), <pv>/data/vol_data.json. A pod's use of one is
// the symlink pods/<uid>/volumeDevices/kubernetes.io~csi/<pv> to its publish path, as the kubelet
// marks it, which teardown (also an agent's restarted) follows.

func (m *Manager) blockDir(parts ...string) string {
	return filepath.Join(append([]string{m.cfg.RootDir, "plugins", PluginName, "volumeDevices"}, parts...)...)
}

func (m *Manager) podBlockDir(uid types.UID) (string, error) {
	dir, err := podpath.PodDir(m.cfg.RootDir, uid)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "volumeDevices", "kubernetes.io~csi"), nil
}

// publishBlock stages (when the driver stages) and publishes a PV of volumeMode Block for the
// pod: the published file is the device containers get at their volumeDevices' paths.
func (m *Manager) publishBlock(ctx context.Context, c *client, pod *v1.Pod, vol Volume, drv *storagev1.CSIDriver,
	publishContext map[string]string, stage bool) (Published, error) {
	src, pv := vol.Source, vol.PV.Name
	if err := podpath.Element("PV name", pv); err != nil {
		return Published{}, err
	}
	capability := &csipb.VolumeCapability{AccessType: &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: accessMode(vol.PV.Spec.AccessModes)}}
	data := volData{SpecVolID: pv, VolumeHandle: src.VolumeHandle, DriverName: src.Driver, NodeName: m.cfg.NodeName,
		AttachmentID: attachmentName(src.VolumeHandle, src.Driver, m.cfg.NodeName), VolumeLifecycleMode: string(storagev1.VolumeLifecyclePersistent)}
	dataDir := m.blockDir(pv, "data")
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return Published{}, err
	}
	if err := saveVolData(dataDir, data); err != nil {
		return Published{}, err
	}
	publishDir := m.blockDir("publish", pv)
	if err := os.MkdirAll(publishDir, 0o750); err != nil {
		return Published{}, err
	}
	target := filepath.Join(publishDir, string(pod.UID))
	marks, err := m.podBlockDir(pod.UID)
	if err != nil {
		return Published{}, err
	}
	if err := os.MkdirAll(marks, 0o750); err != nil {
		return Published{}, err
	}
	// Marked before the stage and the publish, so that a teardown never misses a device the
	// driver staged or published, also when the pod went while it was staging.
	if err := os.Symlink(target, filepath.Join(marks, pv)); err != nil && !errors.Is(err, os.ErrExist) {
		return Published{}, err
	}
	staging := ""
	if stage {
		staging = m.blockDir("staging", pv)
		if err := m.stage(ctx, c, src, capability, publishContext, dataDir, staging); err != nil {
			return Published{}, err
		}
		if err := saveVolData(dataDir, data); err != nil { // stage wrote its own
			return Published{}, err
		}
	}
	attrs, secrets, err := m.publishInputs(ctx, pod, vol, drv)
	if err != nil {
		return Published{}, err
	}
	pctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := c.node.NodePublishVolume(pctx, &csipb.NodePublishVolumeRequest{VolumeId: src.VolumeHandle, PublishContext: publishContext,
		StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability, Readonly: vol.ReadOnly,
		Secrets: secrets, VolumeContext: attrs}); err != nil {
		return Published{}, errors.New(logf("blockMapper.MapPodDevice failed: rpc error: %v", err))
	}
	return Published{Path: target, Republish: republishes(drv)}, nil
}

// tearDownBlock unpublishes the pod's block volumes and unstages those no other pod publishes.
func (m *Manager) tearDownBlock(ctx context.Context, uid types.UID) error {
	marks, err := m.podBlockDir(uid)
	if err != nil {
		return err
	}
	ents, err := os.ReadDir(marks)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		pv := e.Name()
		if podpath.Element("PV name", pv) != nil {
			continue
		}
		data, err := loadVolData(m.blockDir(pv, "data"))
		if errors.Is(err, os.ErrNotExist) {
			os.Remove(filepath.Join(marks, pv)) // set up stopped before anything was published
			continue
		}
		if err == nil {
			err = validDriver(data.DriverName)
		}
		if err != nil {
			return fmt.Errorf("unmapper failed to load volume data file [%s]: %w", m.blockDir(pv, "data"), err)
		}
		if err := m.unpublish(ctx, data, m.blockDir("publish", pv, string(uid))); err != nil {
			return err
		}
		if err := os.Remove(filepath.Join(marks, pv)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if others, _ := os.ReadDir(m.blockDir("publish", pv)); len(others) > 0 {
			continue
		}
		if err := m.unstageBlock(ctx, data, pv); err != nil {
			return err
		}
	}
	return nil
}

// unstageBlock releases a block volume no pod publishes from the node, and its folders.
func (m *Manager) unstageBlock(ctx context.Context, data volData, pv string) error {
	staging := m.blockDir("staging", pv)
	if _, err := os.Stat(staging); err == nil {
		if err := m.nodeUnstage(ctx, data, staging, "blockMapper.UnmapDevice"); err != nil {
			return err
		}
		os.Remove(staging)
	}
	os.Remove(m.blockDir("publish", pv))
	os.Remove(filepath.Join(m.blockDir(pv, "data"), volDataFile))
	os.Remove(m.blockDir(pv, "data"))
	if err := os.Remove(m.blockDir(pv)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", m.blockDir(pv), err)
	}
	return nil
}
