package csidriver

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// defaultSize is a volume's size when nobody asked for one: a static PV's volume whose file is
// made at its first stage.
const defaultSize = 64 << 20

func (d *Driver) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	return &csi.NodeGetInfoResponse{NodeId: d.NodeID, MaxVolumesPerNode: 16,
		AccessibleTopology: &csi.Topology{Segments: d.Topology}}, nil
}

func (d *Driver) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	var caps []*csi.NodeServiceCapability
	for _, t := range []csi.NodeServiceCapability_RPC_Type{csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME, csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csi.NodeServiceCapability_RPC_EXPAND_VOLUME} {
		caps = append(caps, &csi.NodeServiceCapability{Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: t}}})
	}
	return &csi.NodeGetCapabilitiesResponse{Capabilities: caps}, nil
}

// required answers InvalidArgument for the first of the named fields that is empty.
func required(fields ...string) error {
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i+1] == "" {
			return status.Errorf(codes.InvalidArgument, "%s is required", fields[i])
		}
	}
	return nil
}

// NodeExpandVolume grows a staged volume's file to the size asked and has the loop device see
// it. It leaves the ext4 on it as it is: growing a mounted ext4 needs CAP_SYS_RESOURCE, which
// root lacks on the machines the tests run on; what the node does is what is tested.
func (d *Driver) NodeExpandVolume(_ context.Context, r *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	if err := required("volume ID", r.VolumeId, "volume path", r.VolumePath); err != nil {
		return nil, err
	}
	img, err := d.backing(r.VolumeId)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(img); err != nil {
		return nil, status.Errorf(codes.NotFound, "volume %s: %v", r.VolumeId, err)
	}
	if err := d.begin(r.VolumeId); err != nil {
		return nil, err
	}
	defer d.end(r.VolumeId)
	dev, err := device(img)
	if err != nil {
		return nil, err
	}
	if dev == "" {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged", r.VolumeId)
	}
	size := r.GetCapacityRange().GetRequiredBytes()
	if size <= 0 {
		return nil, status.Error(codes.InvalidArgument, "a required size is needed")
	}
	if err := os.Truncate(img, size); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if _, err := run("losetup", "-c", dev); err != nil {
		return nil, err
	}
	d.record(fmt.Sprintf("expand %s %d path=%s staged=%v", r.VolumeId, size, filepath.Base(r.VolumePath), r.StagingTargetPath != ""))
	return &csi.NodeExpandVolumeResponse{CapacityBytes: size}, nil
}

// NodeGetVolumeStats measures the published volume's filesystem (statfs), bytes and inodes.
func (d *Driver) NodeGetVolumeStats(_ context.Context, r *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	if err := required("volume ID", r.VolumeId, "volume path", r.VolumePath); err != nil {
		return nil, err
	}
	if !isMount(r.VolumePath) {
		return nil, status.Errorf(codes.NotFound, "%s is not published", r.VolumePath)
	}
	if fi, err := os.Stat(r.VolumePath); err == nil && !fi.IsDir() { // a raw block volume: its size
		img, err := d.backing(r.VolumeId)
		if err != nil {
			return nil, err
		}
		st, err := os.Stat(img)
		if err != nil {
			return nil, status.Errorf(codes.NotFound, "volume %s: %v", r.VolumeId, err)
		}
		return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{{Unit: csi.VolumeUsage_BYTES, Total: st.Size()}}}, nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(r.VolumePath, &st); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	bs := int64(st.Bsize)
	return &csi.NodeGetVolumeStatsResponse{Usage: []*csi.VolumeUsage{
		{Unit: csi.VolumeUsage_BYTES, Total: int64(st.Blocks) * bs, Available: int64(st.Bavail) * bs, Used: int64(st.Blocks-st.Bfree) * bs},
		{Unit: csi.VolumeUsage_INODES, Total: int64(st.Files), Available: int64(st.Ffree), Used: int64(st.Files - st.Ffree)},
	}}, nil
}

// NodeStageVolume attaches the volume's file to a loop device and, for a filesystem volume,
// mounts its ext4 (made at the first stage) at the staging path. A volume staged already is
// answered at once, as the spec asks.
func (d *Driver) NodeStageVolume(_ context.Context, r *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	if err := required("volume ID", r.VolumeId, "staging target path", r.StagingTargetPath); err != nil {
		return nil, err
	}
	if r.VolumeCapability == nil {
		return nil, status.Error(codes.InvalidArgument, "volume capability is required")
	}
	img, err := d.backing(r.VolumeId)
	if err != nil {
		return nil, err
	}
	if err := d.begin(r.VolumeId); err != nil {
		return nil, err
	}
	if hook := d.StageHook; hook != nil {
		defer hook(true) // after end, deferred below
		defer d.end(r.VolumeId)
		hook(false)
	} else {
		defer d.end(r.VolumeId)
	}
	block := r.VolumeCapability.GetBlock() != nil
	dev, err := device(img)
	if err != nil {
		return nil, err
	}
	if dev != "" && (block || isMount(r.StagingTargetPath)) {
		return &csi.NodeStageVolumeResponse{}, nil
	}
	if err := ensureFile(img, defaultSize); err != nil {
		return nil, err
	}
	if dev == "" {
		if dev, err = run("losetup", "--find", "--show", img); err != nil {
			return nil, err
		}
	}
	if !block {
		if err := exec.Command("blkid", dev).Run(); err != nil {
			if _, err := run("mkfs.ext4", "-q", dev); err != nil {
				return nil, err
			}
		}
		if _, err := run("mount", dev, r.StagingTargetPath); err != nil {
			return nil, err
		}
	}
	d.record("stage " + r.VolumeId)
	return &csi.NodeStageVolumeResponse{}, nil
}

// ensureFile makes a volume's file of size bytes (sparse) unless it is there.
func ensureFile(img string, size int64) error {
	f, err := os.OpenFile(img, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if os.IsExist(err) {
		return nil
	}
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(img)
		return status.Error(codes.Internal, err.Error())
	}
	return nil
}

func (d *Driver) NodeUnstageVolume(_ context.Context, r *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if err := required("volume ID", r.VolumeId, "staging target path", r.StagingTargetPath); err != nil {
		return nil, err
	}
	img, err := d.backing(r.VolumeId)
	if err != nil {
		return nil, err
	}
	if err := d.begin(r.VolumeId); err != nil {
		return nil, err
	}
	defer d.end(r.VolumeId)
	mounted := isMount(r.StagingTargetPath)
	if mounted {
		if _, err := run("umount", r.StagingTargetPath); err != nil {
			return nil, err
		}
	}
	dev, err := device(img)
	if err != nil {
		return nil, err
	}
	if dev != "" {
		if _, err := run("losetup", "-d", dev); err != nil {
			return nil, err
		}
	}
	if mounted || dev != "" {
		d.record("unstage " + r.VolumeId)
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (d *Driver) NodePublishVolume(_ context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if err := required("volume ID", r.VolumeId, "target path", r.TargetPath); err != nil {
		return nil, err
	}
	if r.VolumeCapability == nil {
		return nil, status.Error(codes.InvalidArgument, "volume capability is required")
	}
	if r.StagingTargetPath == "" {
		return d.publishEphemeral(r)
	}
	img, err := d.backing(r.VolumeId)
	if err != nil {
		return nil, err
	}
	if err := d.begin(r.VolumeId); err != nil {
		return nil, err
	}
	defer d.end(r.VolumeId)
	block := r.VolumeCapability.GetBlock() != nil
	dev, err := device(img)
	if err != nil {
		return nil, err
	}
	if dev == "" || (!block && !isMount(r.StagingTargetPath)) {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged", r.VolumeId)
	}
	if isMount(r.TargetPath) {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	src := r.StagingTargetPath
	if block {
		src = dev
		f, err := os.OpenFile(r.TargetPath, os.O_CREATE, 0o600)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		f.Close()
	} else if err := os.MkdirAll(r.TargetPath, 0o750); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if _, err := run("mount", "--bind", src, r.TargetPath); err != nil {
		return nil, err
	}
	if r.Readonly {
		if _, err := run("mount", "-o", "remount,bind,ro", r.TargetPath); err != nil {
			return nil, err
		}
	}
	d.record(fmt.Sprintf("publish %s ro=%v ctx=%s", r.VolumeId, r.Readonly, contextKeys(r.VolumeContext)))
	return &csi.NodePublishVolumeResponse{}, nil
}

// publishEphemeral serves an inline volume (one published without staging): a tmpfs of 16 MiB
// of its own at the target, gone at unpublish.
func (d *Driver) publishEphemeral(r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if isMount(r.TargetPath) {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	if err := os.MkdirAll(r.TargetPath, 0o750); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	opts := "size=16m"
	if r.Readonly {
		opts += ",ro"
	}
	if _, err := run("mount", "-t", "tmpfs", "-o", opts, "csi-ephemeral", r.TargetPath); err != nil {
		return nil, err
	}
	d.record(fmt.Sprintf("publish %s ro=%v ctx=%s", r.VolumeId, r.Readonly, contextKeys(r.VolumeContext)))
	return &csi.NodePublishVolumeResponse{}, nil
}

func (d *Driver) NodeUnpublishVolume(_ context.Context, r *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if err := required("volume ID", r.VolumeId, "target path", r.TargetPath); err != nil {
		return nil, err
	}
	if err := d.begin(r.VolumeId); err != nil {
		return nil, err
	}
	defer d.end(r.VolumeId)
	if isMount(r.TargetPath) {
		if _, err := run("umount", r.TargetPath); err != nil {
			return nil, err
		}
	}
	if err := os.Remove(r.TargetPath); err != nil && !os.IsNotExist(err) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	d.record("unpublish " + r.VolumeId)
	return &csi.NodeUnpublishVolumeResponse{}, nil
}
