package kuberuntime

import (
	"context"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// noConfigMaps is an apiserver that has no config maps or secrets.
type noConfigMaps struct{}

func (noConfigMaps) ConfigMapData(_ context.Context, _, name string) (map[string]string, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (noConfigMaps) SecretData(_ context.Context, _, name string) (map[string][]byte, error) {
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

// TestConfigGenerationFailuresAreCreateContainerConfigError: what keeps the agent from making the
// container's config is CreateContainerConfigError, and the runtime is never asked to create it.
func TestConfigGenerationFailuresAreCreateContainerConfigError(t *testing.T) {
	cases := []struct {
		name  string
		setup func(f *fixture, c *v1.Container, pod *v1.Pod)
		msg   string
	}{
		{"missing config map key ref", func(f *fixture, c *v1.Container, _ *v1.Pod) {
			c.Env = []v1.EnvVar{{Name: "X", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{
				LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Key: "k"}}}}
		}, `configmaps "cm" not found`},
		{"missing secret envFrom", func(f *fixture, c *v1.Container, _ *v1.Pod) {
			c.EnvFrom = []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "s"}}}}
		}, `secrets "s" not found`},
		{"rejected subPathExpr", func(f *fixture, c *v1.Container, pod *v1.Pod) {
			f.m.SubPaths = &fakeSubPaths{}
			pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
			c.Env = []v1.EnvVar{{Name: "P", Value: ".."}}
			c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/d", SubPathExpr: "$(P)/x"}}
		}, "invalid subPath"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.m.EnvData = noConfigMaps{}
			f.cri.AddImage("busybox")
			pod := testPod(v1.RestartPolicyAlways, nil, "a")
			tc.setup(f, &pod.Spec.Containers[0], pod)
			err := f.sync(pod)
			if !errors.Is(err, kubecontainer.ErrCreateConfig) || errors.Is(err, kubecontainer.ErrCreateContainer) {
				t.Fatalf("sync: %v, want CreateContainerConfigError only", err)
			}
			r, ok := f.m.Reasons.Get(pod.UID, "a")
			if !ok || r.Reason != kubecontainer.ReasonCreateConfigError || !strings.Contains(r.Message, tc.msg) ||
				strings.HasPrefix(r.Message, "Create") {
				t.Fatalf("waiting %+v, want CreateContainerConfigError with %q", r, tc.msg)
			}
			if calls := f.cri.CallsWithPrefix("CreateContainer"); len(calls) != 0 {
				t.Fatalf("runtime asked to create: %q", calls)
			}
		})
	}
}

func TestRuntimeFailuresKeepTheirReasons(t *testing.T) {
	f := newFixture(t)
	f.cri.AddImage("busybox")
	f.cri.FailStart("a", errors.New("exec format error"))
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	if err := f.sync(pod); !errors.Is(err, kubecontainer.ErrRunContainer) || errors.Is(err, kubecontainer.ErrCreateConfig) {
		t.Fatalf("sync: %v, want RunContainerError", err)
	}
}
