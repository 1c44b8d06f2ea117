package csi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/internal/podpath"
)

// TearDown unpublishes every CSI volume of the pod (as its vol_data.json files name them, and
// its raw block volumes' marks) and unstages those no other pod on the node publishes any more. It stops at the first volume a
// driver cannot release (a driver gone is waited for: the caller tries again later).
func (m *Manager) TearDown(ctx context.Context, uid types.UID) error {
	if err := m.tearDownBlock(ctx, uid); err != nil {
		return err
	}
	volumes, err := podpath.VolumesDir(m.cfg.RootDir, uid)
	if err != nil {
		return err
	}
	root := filepath.Join(volumes, "kubernetes.io~csi")
	ents, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		m.released(uid)
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		data, err := loadVolData(dir)
		if errors.Is(err, os.ErrNotExist) {
			os.Remove(filepath.Join(dir, "mount")) // set up stopped before it published
			os.Remove(dir)
			continue
		}
		if err == nil {
			err = validDriver(data.DriverName)
		}
		if err != nil {
			return fmt.Errorf("unmounter failed to load volume data file [%s]: %w", dir, err)
		}
		if err := m.unpublish(ctx, data, filepath.Join(dir, "mount")); err != nil {
			return err
		}
		os.Remove(filepath.Join(dir, volDataFile))
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", dir, err)
		}
		if !m.publishedElsewhere(data) {
			if err := m.unstage(ctx, data); err != nil {
				return err
			}
		}
	}
	m.released(uid)
	return nil
}

func (m *Manager) unpublish(ctx context.Context, data volData, target string) error {
	c, err := m.client(data.DriverName)
	if err != nil {
		return errors.New(logf("unmounter.TearDownAt failed to get CSI client: %v", err))
	}
	defer c.close()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := c.node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: data.VolumeHandle, TargetPath: target}); err != nil {
		return errors.New(logf("Unmounter.TearDownAt failed: rpc error: %v", err))
	}
	// The driver removes the target; one it left (or never made) goes now.
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", target, err)
	}
	return nil
}

// unstage releases the volume from the node, when it was staged.
func (m *Manager) unstage(ctx context.Context, data volData) error {
	global := m.globalDir(data.DriverName, data.VolumeHandle)
	if _, err := os.Stat(global); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	staging := filepath.Join(global, "globalmount")
	if err := m.nodeUnstage(ctx, data, staging, "attacher.UnmountDevice"); err != nil {
		return err
	}
	os.Remove(staging)
	os.Remove(filepath.Join(global, volDataFile))
	if err := os.Remove(global); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", global, err)
	}
	return nil
}

// publishedElsewhere reports whether another pod's folder still names the volume.
func (m *Manager) publishedElsewhere(data volData) bool {
	pods, err := os.ReadDir(filepath.Join(m.cfg.RootDir, "pods"))
	if err != nil {
		return false
	}
	for _, p := range pods {
		dir := filepath.Join(m.cfg.RootDir, "pods", p.Name(), "volumes", "kubernetes.io~csi")
		vols, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, v := range vols {
			d, err := loadVolData(filepath.Join(dir, v.Name()))
			if err == nil && d.DriverName == data.DriverName && d.VolumeHandle == data.VolumeHandle {
				return true
			}
		}
	}
	return false
}

// nodeUnstage asks the volume's driver to release it from the node; op names the kubelet's step
// in messages.
func (m *Manager) nodeUnstage(ctx context.Context, data volData, staging, op string) error {
	c, err := m.client(data.DriverName)
	if err != nil {
		return errors.New(logf("%s failed to get CSI client: %v", op, err))
	}
	defer c.close()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := c.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{VolumeId: data.VolumeHandle, StagingTargetPath: staging}); err != nil {
		return errors.New(logf("%s failed: rpc error: %v", op, err))
	}
	return nil
}
