// Package csidriver is a CSI node plugin of the project's own, for tests: node-driver-registrar
// and the upstream CSI drivers are not on the Go module proxy, so this stands in for them. Each
// volume is a file of its own behind a loop device: staged, the device is formatted at its first
// use (ext4) and mounted at the staging path, or left raw for a block volume; published, the
// staging mount (or the device) is bound at the pod's target path. It also serves the
// registration API on a socket in the agent's plugins_registry folder, as node-driver-registrar
// does for a real driver, so the agent finds it the way a kubelet finds one.
package csidriver

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Driver is one running test driver.
type Driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	registerapi.UnimplementedRegistrationServer

	Name, NodeID string
	// Endpoint is the driver's CSI socket; Registration its registration socket ("" without).
	Endpoint, Registration string
	// Topology is what NodeGetInfo reports as the node's accessible topology.
	Topology map[string]string

	dir string
	srv []*grpc.Server

	mu      sync.Mutex
	loops   map[string]string // volume ID → its loop device, while staged
	calls   []string
	statusC chan *registerapi.RegistrationStatus
}

// Start serves a driver named name with its state and sockets under dir, and, when regDir is
// not "", its registration socket there (<name>-reg.sock). Everything is stopped and released at
// the test's end.
func Start(t testing.TB, dir, regDir, name string) *Driver {
	t.Helper()
	for _, tool := range []string{"losetup", "mkfs.ext4", "blkid", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s: %v (apt-get install util-linux e2fsprogs mount)", tool, err)
		}
	}
	d := &Driver{Name: name, NodeID: "node-" + name, dir: dir, loops: map[string]string{},
		Topology: map[string]string{"topology.example.com/zone": "z1"}, statusC: make(chan *registerapi.RegistrationStatus, 16)}
	if err := os.MkdirAll(filepath.Join(dir, "volumes"), 0o700); err != nil {
		t.Fatal(err)
	}
	d.Endpoint = filepath.Join(dir, "csi.sock")
	s := grpc.NewServer()
	csi.RegisterIdentityServer(s, d)
	csi.RegisterNodeServer(s, d)
	d.serve(t, s, d.Endpoint)
	if regDir != "" {
		d.Registration = filepath.Join(regDir, name+"-reg.sock")
		r := grpc.NewServer()
		registerapi.RegisterRegistrationServer(r, d)
		d.serve(t, r, d.Registration)
	}
	t.Cleanup(d.Stop)
	return d
}

func (d *Driver) serve(t testing.TB, s *grpc.Server, socket string) {
	t.Helper()
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	d.srv = append(d.srv, s)
	go s.Serve(ln)
}

// Stop stops serving and releases every loop device still staged.
func (d *Driver) Stop() {
	for _, s := range d.srv {
		s.Stop()
	}
	d.srv = nil
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, dev := range d.loops {
		exec.Command("losetup", "-d", dev).Run()
		delete(d.loops, id)
	}
}

// Calls are the Node calls the driver took, in order ("stage vol-1", "publish vol-1 <target>"…).
func (d *Driver) Calls() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.calls...)
}

func (d *Driver) record(s string) {
	d.mu.Lock()
	d.calls = append(d.calls, s)
	d.mu.Unlock()
}

// Statuses are the registration outcomes the agent told the driver.
func (d *Driver) Statuses() <-chan *registerapi.RegistrationStatus { return d.statusC }

func (d *Driver) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: d.Name, Endpoint: d.Endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

func (d *Driver) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	select {
	case d.statusC <- s:
	default:
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

func (d *Driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: d.Name, VendorVersion: "0.1.0"}, nil
}

func (d *Driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{}, nil
}

func (d *Driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

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

// NodeExpandVolume grows a staged volume's file to the size asked and has the loop device see
// it. It leaves the ext4 on it as it is: growing a mounted ext4 needs CAP_SYS_RESOURCE, which
// root lacks on the machines the tests run on; what the node does is what is tested.
func (d *Driver) NodeExpandVolume(_ context.Context, r *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	img, err := d.backing(r.VolumeId)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	dev, ok := d.loops[r.VolumeId]
	d.mu.Unlock()
	if !ok {
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
	if !isMount(r.VolumePath) {
		return nil, status.Errorf(codes.NotFound, "%s is not published", r.VolumePath)
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

// backing is the volume's file; a volume ID names a file, so it must be a plain name.
func (d *Driver) backing(id string) (string, error) {
	if id == "" || id != filepath.Base(id) || id == "." || id == ".." {
		return "", status.Errorf(codes.InvalidArgument, "volume ID %q", id)
	}
	return filepath.Join(d.dir, "volumes", id+".img"), nil
}

func run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return "", status.Errorf(codes.Internal, "%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

func (d *Driver) NodeStageVolume(_ context.Context, r *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	img, err := d.backing(r.VolumeId)
	if err != nil {
		return nil, err
	}
	if r.StagingTargetPath == "" || r.VolumeCapability == nil {
		return nil, status.Error(codes.InvalidArgument, "staging path and capability are required")
	}
	d.mu.Lock()
	_, staged := d.loops[r.VolumeId]
	d.mu.Unlock()
	if staged {
		return &csi.NodeStageVolumeResponse{}, nil // idempotent, as the spec asks
	}
	if _, err := os.Stat(img); os.IsNotExist(err) {
		f, err := os.Create(img)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		err = f.Truncate(64 << 20)
		f.Close()
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
	}
	dev, err := run("losetup", "--find", "--show", img)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.loops[r.VolumeId] = dev
	d.mu.Unlock()
	d.record("stage " + r.VolumeId)
	if r.VolumeCapability.GetBlock() != nil {
		return &csi.NodeStageVolumeResponse{}, nil
	}
	if _, err := exec.Command("blkid", dev).Output(); err != nil {
		if _, err := run("mkfs.ext4", "-q", dev); err != nil {
			return nil, err
		}
	}
	if _, err := run("mount", dev, r.StagingTargetPath); err != nil {
		return nil, err
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

func (d *Driver) NodeUnstageVolume(_ context.Context, r *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	d.mu.Lock()
	dev, ok := d.loops[r.VolumeId]
	d.mu.Unlock()
	if !ok {
		return &csi.NodeUnstageVolumeResponse{}, nil
	}
	if isMount(r.StagingTargetPath) {
		if _, err := run("umount", r.StagingTargetPath); err != nil {
			return nil, err
		}
	}
	if _, err := run("losetup", "-d", dev); err != nil {
		return nil, err
	}
	d.mu.Lock()
	delete(d.loops, r.VolumeId)
	d.mu.Unlock()
	d.record("unstage " + r.VolumeId)
	return &csi.NodeUnstageVolumeResponse{}, nil
}

func (d *Driver) NodePublishVolume(_ context.Context, r *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	if r.StagingTargetPath == "" {
		return d.publishEphemeral(r)
	}
	d.mu.Lock()
	dev, ok := d.loops[r.VolumeId]
	d.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.FailedPrecondition, "volume %s is not staged", r.VolumeId)
	}
	if isMount(r.TargetPath) {
		return &csi.NodePublishVolumeResponse{}, nil
	}
	src := r.StagingTargetPath
	if r.VolumeCapability.GetBlock() != nil {
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

func contextKeys(m map[string]string) string {
	var ks []string
	for k, v := range m {
		ks = append(ks, k+"="+v)
	}
	slices.Sort(ks)
	return strings.Join(ks, ",")
}

// isMount reports whether path is a mount point (its device differs from its parent's, or it is
// a bind of the same filesystem: mountinfo names it).
func isMount(path string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && unescape(f[4]) == path {
			return true
		}
	}
	return false
}

func unescape(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}
