package kuberuntime

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// claimPaths resolves every persistentVolumeClaim volume to a folder, read-only when asked.
type claimPaths struct {
	path     string
	readOnly bool
}

func (claimPaths) Path(*v1.Pod, string) (string, bool) { return "", false }
func (c claimPaths) ClaimPath(*v1.Pod, string) (string, bool, bool) {
	return c.path, c.readOnly, c.path != ""
}

// TestClaimVolumeMount: a claim's PV folder is mounted where the container asks, read-only when
// the claim or the mount says so, and a claim the volume manager has not resolved keeps the
// container from being created.
func TestClaimVolumeMount(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		paths                 claimPaths
		mountReadOnly, wantRO bool
		wantErr               string
	}{
		{name: "writable", paths: claimPaths{path: "/srv/pv"}},
		{name: "claimed read-only", paths: claimPaths{path: "/srv/pv", readOnly: true}, wantRO: true},
		{name: "mounted read-only", paths: claimPaths{path: "/srv/pv"}, mountReadOnly: true, wantRO: true},
		{name: "not resolved", wantErr: `volume "data": its claim is not set up`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.m.Volumes = tc.paths
			pod := testPod(v1.RestartPolicyAlways, nil, "a")
			pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
				PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}
			c := &pod.Spec.Containers[0]
			c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data", ReadOnly: tc.mountReadOnly}}
			cfg, err := f.m.generateContainerConfig(context.Background(), pod, c, 0, "sha256:abc", nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("config: %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m := cfg.Mounts[0]
			if m.HostPath != "/srv/pv" || m.ContainerPath != "/data" || m.Readonly != tc.wantRO {
				t.Errorf("mount %+v, want /srv/pv at /data read-only %v", m, tc.wantRO)
			}
		})
	}
}

// A block claim named in volumeDevices becomes a device of the container at its device path,
// as the kubelet's makeBlockVolumes: read-write-mknod, or read only for a claim read-only; what
// is not a block device node is never passed.
func TestVolumeDevices(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "loop-like")
	if err := unix.Mknod(dev, unix.S_IFBLK|0o600, int(unix.Mkdev(7, 200))); err != nil {
		t.Fatalf("mknod (the test runs as root): %v", err)
	}
	for _, tc := range []struct {
		name      string
		paths     claimPaths
		devPath   string
		wantPerms string
		wantErr   string
	}{
		{name: "writable", paths: claimPaths{path: dev}, devPath: "/dev/xvda", wantPerms: "mrw"},
		{name: "claimed read-only", paths: claimPaths{path: dev, readOnly: true}, devPath: "/dev/xvda", wantPerms: "r"},
		{name: "not a device", paths: claimPaths{path: t.TempDir()}, devPath: "/dev/xvda", wantErr: "is not a block device"},
		{name: "not resolved", devPath: "/dev/xvda", wantErr: `cannot find volume "data" to pass into container "a"`},
		{name: "relative path", paths: claimPaths{path: dev}, devPath: "dev/xvda", wantErr: "error DevicePath `dev/xvda` must be an absolute path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.m.Volumes = tc.paths
			pod := testPod(v1.RestartPolicyAlways, nil, "a")
			pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{
				PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}
			c := &pod.Spec.Containers[0]
			c.VolumeDevices = []v1.VolumeDevice{{Name: "data", DevicePath: tc.devPath}}
			cfg, err := f.m.generateContainerConfig(context.Background(), pod, c, 0, "sha256:abc", nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("config: %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Devices) != 1 || cfg.Devices[0].HostPath != dev || cfg.Devices[0].ContainerPath != tc.devPath ||
				cfg.Devices[0].Permissions != tc.wantPerms {
				t.Errorf("devices %+v, want %s at %s (%s)", cfg.Devices, dev, tc.devPath, tc.wantPerms)
			}
		})
	}
}
