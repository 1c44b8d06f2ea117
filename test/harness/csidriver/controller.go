package csidriver

import (
	"context"
	"os"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// The controller service makes a volume's file at CreateVolume and removes it at DeleteVolume;
// it attaches nothing (no ControllerPublishVolume), as a node-local driver does.

func (d *Driver) ControllerGetCapabilities(context.Context, *csi.ControllerGetCapabilitiesRequest) (*csi.ControllerGetCapabilitiesResponse, error) {
	return &csi.ControllerGetCapabilitiesResponse{Capabilities: []*csi.ControllerServiceCapability{{Type: &csi.ControllerServiceCapability_Rpc{
		Rpc: &csi.ControllerServiceCapability_RPC{Type: csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME}}}}}, nil
}

// CreateVolume names the volume after the request (its ID is its name): asked again with the
// same name and size it answers the same, with another size AlreadyExists.
func (d *Driver) CreateVolume(_ context.Context, r *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	if err := required("name", r.Name); err != nil {
		return nil, err
	}
	if len(r.VolumeCapabilities) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	img, err := d.backing(r.Name)
	if err != nil {
		return nil, err
	}
	size := r.GetCapacityRange().GetRequiredBytes()
	if size == 0 {
		size = defaultSize
	}
	if limit := r.GetCapacityRange().GetLimitBytes(); size < 0 || (limit > 0 && size > limit) {
		return nil, status.Errorf(codes.OutOfRange, "capacity %d beyond the limit %d", size, limit)
	}
	if err := d.begin(r.Name); err != nil {
		return nil, err
	}
	defer d.end(r.Name)
	if st, err := os.Stat(img); err == nil {
		if st.Size() != size {
			return nil, status.Errorf(codes.AlreadyExists, "volume %s exists with %d bytes, not %d", r.Name, st.Size(), size)
		}
	} else if err := ensureFile(img, size); err != nil {
		return nil, err
	}
	return &csi.CreateVolumeResponse{Volume: &csi.Volume{VolumeId: r.Name, CapacityBytes: size,
		AccessibleTopology: []*csi.Topology{{Segments: d.Topology}}}}, nil
}

// DeleteVolume removes the volume's file; a volume that is not there is deleted already, one
// still staged is refused.
func (d *Driver) DeleteVolume(_ context.Context, r *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	if err := required("volume ID", r.VolumeId); err != nil {
		return nil, err
	}
	img, err := d.backing(r.VolumeId)
	if err != nil {
		return &csi.DeleteVolumeResponse{}, nil // no file can have that name
	}
	if err := d.begin(r.VolumeId); err != nil {
		return nil, err
	}
	defer d.end(r.VolumeId)
	if dev, err := device(img); err != nil || dev != "" {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is staged (%s %v)", r.VolumeId, dev, err)
	}
	if err := os.Remove(img); err != nil && !os.IsNotExist(err) {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return &csi.DeleteVolumeResponse{}, nil
}

// ValidateVolumeCapabilities confirms every capability: a volume is a filesystem or a block
// device, in any access mode, of one node.
func (d *Driver) ValidateVolumeCapabilities(_ context.Context, r *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	if err := required("volume ID", r.VolumeId); err != nil {
		return nil, err
	}
	if len(r.VolumeCapabilities) == 0 {
		return nil, status.Error(codes.InvalidArgument, "volume capabilities are required")
	}
	img, err := d.backing(r.VolumeId)
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "volume %s: %v", r.VolumeId, err)
	}
	if _, err := os.Stat(img); err != nil {
		return nil, status.Errorf(codes.NotFound, "volume %s: %v", r.VolumeId, err)
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext: r.VolumeContext, VolumeCapabilities: r.VolumeCapabilities, Parameters: r.Parameters}}, nil
}
