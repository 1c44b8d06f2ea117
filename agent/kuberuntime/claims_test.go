package kuberuntime

import (
	"context"
	"strings"
	"testing"

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
