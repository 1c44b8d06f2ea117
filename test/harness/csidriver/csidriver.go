// Package csidriver is a CSI node plugin of the project's own, for tests: node-driver-registrar
// and the upstream CSI drivers are not on the Go module proxy, so this stands in for them. Each
// volume is a file of its own behind a loop device: staged, the device is formatted at its first
// use (ext4) and mounted at the staging path, or left raw for a block volume; published, the
// staging mount (or the device) is bound at the pod's target path. It also serves the
// registration API on a socket in the agent's plugins_registry folder, as node-driver-registrar
// does for a real driver, so the agent finds it the way a kubelet finds one. A controller
// service makes and deletes the volume files (CreateVolume), enough for the CSI sanity suite.
//
// The driver keeps no state of its own beyond the calls it records: what is staged is what the
// system says (the loop device of a volume's file, the mounts), so a driver stopped abruptly and
// started again (Crash, Start) carries on where it was, as a real one restarted does.
package csidriver

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	csi "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// Driver is one running test driver.
type Driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer
	csi.UnimplementedControllerServer
	registerapi.UnimplementedRegistrationServer

	Name, NodeID string
	// Endpoint is the driver's CSI socket; Registration its registration socket ("" without).
	Endpoint, Registration string
	// Topology is what NodeGetInfo reports as the node's accessible topology.
	Topology map[string]string

	// StageHook, when set, is called by NodeStageVolume with false once it holds its volume
	// (the stage waits for it to return: a stage that takes its time), and with true once it has
	// let the volume go.
	StageHook func(finished bool)

	dir string
	srv []*grpc.Server

	mu      sync.Mutex
	busy    map[string]bool // volume IDs with a call in progress
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
	d := &Driver{Name: name, NodeID: "node-" + name, dir: dir, busy: map[string]bool{},
		Topology: map[string]string{"topology.example.com/zone": "z1"}, statusC: make(chan *registerapi.RegistrationStatus, 16)}
	if err := os.MkdirAll(filepath.Join(dir, "volumes"), 0o700); err != nil {
		t.Fatal(err)
	}
	d.Endpoint = filepath.Join(dir, "csi.sock")
	s := grpc.NewServer()
	csi.RegisterIdentityServer(s, d)
	csi.RegisterNodeServer(s, d)
	csi.RegisterControllerServer(s, d)
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

// Crash stops serving at once and leaves what is staged and published as it is, as a driver
// killed does; Start on the same dir brings it back.
func (d *Driver) Crash() {
	for _, s := range d.srv {
		s.Stop()
	}
	d.srv = nil
	for _, sock := range []string{d.Endpoint, d.Registration} {
		if sock != "" {
			os.Remove(sock)
		}
	}
}

// Stop stops serving and releases the loop devices of its volumes (a device still mounted goes
// with its last unmount).
func (d *Driver) Stop() {
	d.Crash()
	imgs, _ := filepath.Glob(filepath.Join(d.dir, "volumes", "*.img"))
	for _, img := range imgs {
		if dev, _ := device(img); dev != "" {
			exec.Command("losetup", "-d", dev).Run()
		}
	}
}

// device is the loop device of a volume's file, "" when there is none.
func device(img string) (string, error) {
	out, err := run("losetup", "--list", "--noheadings", "--output", "NAME", "--associated", img)
	if err != nil {
		return "", err
	}
	dev, _, _ := strings.Cut(out, "\n")
	return strings.TrimSpace(dev), nil
}

// begin takes the volume for one call: the spec has a driver answer Aborted while another call
// on the same volume is in progress.
func (d *Driver) begin(id string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.busy[id] {
		return status.Errorf(codes.Aborted, "an operation on volume %s is in progress", id)
	}
	d.busy[id] = true
	return nil
}

func (d *Driver) end(id string) {
	d.mu.Lock()
	delete(d.busy, id)
	d.mu.Unlock()
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
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{Type: &csi.PluginCapability_Service_{
		Service: &csi.PluginCapability_Service{Type: csi.PluginCapability_Service_CONTROLLER_SERVICE}}}}}, nil
}

func (d *Driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
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
