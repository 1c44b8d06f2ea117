package kuberuntime

import (
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/nodelet/nodelet/agent/images"
	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// imageVolumePod mounts the image volume "data" (reference ref) in container a at /data.
func imageVolumePod(ref string, policy v1.PullPolicy, subPath string) *v1.Pod {
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.Containers[0].ImagePullPolicy = v1.PullIfNotPresent
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: ref, PullPolicy: policy}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data", SubPath: subPath}}
	return pod
}

func recordingFixture(t *testing.T) (*fixture, *record.FakeRecorder) {
	f := newFixture(t)
	rec := record.NewFakeRecorder(100)
	d := f.m.Deps
	d.Recorder = rec
	f.m = NewManager(d)
	f.cri.AddImage("busybox:latest")
	return f, rec
}

func events(rec *record.FakeRecorder) []string {
	var out []string
	for len(rec.Events) > 0 {
		out = append(out, <-rec.Events)
	}
	return out
}

// The volume's image is pulled (before the container's) and mounted by the runtime, read-only,
// with the subPath as the image sub path; no host path is involved.
func TestImageVolumeMounted(t *testing.T) {
	f, rec := recordingFixture(t)
	pod := imageVolumePod("reg/data:1", v1.PullIfNotPresent, "sub/dir")
	pod.Spec.Containers[0].VolumeMounts[0].ReadOnly = false
	prop := v1.MountPropagationHostToContainer
	pod.Spec.Containers[0].VolumeMounts[0].MountPropagation = &prop
	f.mustSync(pod)
	if got := f.cri.CallsWithPrefix("PullImage"); !slices.Equal(got, []string{"PullImage reg/data:1"}) {
		t.Fatalf("pulls %q", got)
	}
	cfg := f.cri.ContainerConfig(f.cri.RunningContainer("a"))
	var found bool
	for _, mnt := range cfg.Mounts {
		if mnt.ContainerPath != "/data" {
			continue
		}
		found = true
		if mnt.HostPath != "" || !mnt.Readonly || mnt.ImageSubPath != "sub/dir" || mnt.Image.GetUserSpecifiedImage() != "reg/data:1" ||
			!strings.HasPrefix(mnt.Image.GetImage(), "sha256:") || mnt.Propagation.String() != "PROPAGATION_HOST_TO_CONTAINER" {
			t.Fatalf("mount %v", mnt)
		}
	}
	if !found {
		t.Fatalf("no mount at /data: %v", cfg.Mounts)
	}
	if evs := events(rec); !slices.Contains(evs, `Normal Pulling Pulling image "reg/data:1"`) {
		t.Fatalf("events %q", evs)
	}

	// Present and IfNotPresent: not pulled again for the next start.
	f.cri.ResetCalls()
	f.cri.ExitContainer(f.cri.RunningContainer("a"), 0)
	f.m.crashBackOff.Reset(crashBackOffKey(pod, &pod.Spec.Containers[0]))
	f.mustSync(pod)
	if got := f.cri.CallsWithPrefix("PullImage"); len(got) != 0 {
		t.Fatalf("pulled again: %q", got)
	}
}

func TestImageVolumePullPolicies(t *testing.T) {
	cases := []struct {
		name      string
		ref       string
		policy    v1.PullPolicy
		present   bool
		wantPulls int
	}{
		{"IfNotPresent, absent", "reg/data:1", v1.PullIfNotPresent, false, 1},
		{"IfNotPresent, present", "reg/data:1", v1.PullIfNotPresent, true, 0},
		{"Always, present", "reg/data:1", v1.PullAlways, true, 1},
		{"default for a tag is IfNotPresent", "reg/data:1", "", true, 0},
		{"default for latest is Always", "reg/data:latest", "", true, 1},
		{"default without a tag is Always", "reg/data", "", true, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, _ := recordingFixture(t)
			if tc.present {
				f.cri.AddImage(images.DefaultTag(tc.ref))
			}
			f.mustSync(imageVolumePod(tc.ref, tc.policy, ""))
			if got := f.cri.CallsWithPrefix("PullImage"); len(got) != tc.wantPulls {
				t.Fatalf("pulls %q, want %d", got, tc.wantPulls)
			}
		})
	}
}

// A volume whose image cannot be had keeps the container from starting, with the kubelet's
// waiting reasons and events.
func TestImageVolumePullFailures(t *testing.T) {
	t.Run("never", func(t *testing.T) {
		f, rec := recordingFixture(t)
		pod := imageVolumePod("reg/data:1", v1.PullNever, "")
		err := f.sync(pod)
		if !errors.Is(err, kubecontainer.ErrImageNeverPull) {
			t.Fatalf("sync: %v", err)
		}
		if r, _ := f.m.Reasons.Get(pod.UID, "a"); r.Reason != "ErrImageNeverPull" ||
			r.Message != `Container image "reg/data:1" is not present with pull policy of Never: ErrImageNeverPull` {
			t.Fatalf("waiting %+v", r)
		}
		evs := events(rec)
		for _, want := range []string{`Warning ErrImageNeverPull Container image "reg/data:1" is not present with pull policy of Never`,
			"Warning Failed Error: ErrImageNeverPull"} {
			if !slices.Contains(evs, want) {
				t.Fatalf("events %q, want %q", evs, want)
			}
		}
		if got := f.cri.CallsWithPrefix("CreateContainer"); len(got) != 0 {
			t.Fatalf("created %q", got)
		}
	})
	t.Run("pull fails then backs off", func(t *testing.T) {
		f, rec := recordingFixture(t)
		f.cri.FailPull("reg/data:1", errors.New("manifest unknown"))
		pod := imageVolumePod("reg/data:1", v1.PullIfNotPresent, "")
		if err := f.sync(pod); !errors.Is(err, kubecontainer.ErrImagePull) {
			t.Fatalf("sync: %v", err)
		}
		if r, _ := f.m.Reasons.Get(pod.UID, "a"); r.Reason != "ErrImagePull" {
			t.Fatalf("waiting %+v", r)
		}
		if evs := events(rec); !slices.Contains(evs, "Warning Failed Error: ErrImagePull") {
			t.Fatalf("events %q", evs)
		}
		if err := f.sync(pod); !errors.Is(err, kubecontainer.ErrImagePullBackOff) {
			t.Fatalf("second sync: %v", err)
		}
		if r, _ := f.m.Reasons.Get(pod.UID, "a"); r.Reason != "ImagePullBackOff" {
			t.Fatalf("waiting %+v", r)
		}
		if evs := events(rec); !slices.Contains(evs, "Warning Failed Error: ImagePullBackOff") {
			t.Fatalf("events %q", evs)
		}
		if got := f.cri.CallsWithPrefix("PullImage busybox"); len(got) != 0 {
			t.Fatalf("the container's image was pulled after its volume failed: %q", got)
		}
	})
}

// A subPath into an image volume is checked as the kubelet checks it; the runtime resolves it.
func TestImageVolumeSubPath(t *testing.T) {
	cases := []struct{ sub, expr, want string }{
		{sub: "/etc", want: "volume mount \"data\": error SubPath `/etc` must not be an absolute path"},
		{sub: "a/../../b", want: "volume mount \"data\": unable to provision SubPath `a/../../b`: must not contain '..'"},
		{expr: "$(WHERE)/x", want: "volume mount \"data\": error SubPath `/x` must not be an absolute path"},
		{expr: "$(POD)/x"},
	}
	for _, tc := range cases {
		f, _ := recordingFixture(t)
		pod := imageVolumePod("reg/data:1", v1.PullIfNotPresent, tc.sub)
		pod.Spec.Containers[0].VolumeMounts[0].SubPathExpr = tc.expr
		pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "WHERE", Value: ""},
			{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
		err := f.sync(pod)
		if tc.want == "" {
			if err != nil {
				t.Fatalf("%+v: %v", tc, err)
			}
			cfg := f.cri.ContainerConfig(f.cri.RunningContainer("a"))
			if cfg.Mounts[0].ImageSubPath != "web/x" {
				t.Fatalf("mount %v", cfg.Mounts[0])
			}
			continue
		}
		if !errors.Is(err, kubecontainer.ErrCreateConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%+v: sync %v", tc, err)
		}
	}
}

// Only the volumes a container mounts are pulled for it.
func TestImageVolumeNotMountedNotPulled(t *testing.T) {
	f, _ := recordingFixture(t)
	pod := imageVolumePod("reg/data:1", v1.PullIfNotPresent, "")
	pod.Spec.Containers[0].VolumeMounts = nil
	f.mustSync(pod)
	if got := f.cri.CallsWithPrefix("PullImage"); len(got) != 0 {
		t.Fatalf("pulls %q", got)
	}
}
