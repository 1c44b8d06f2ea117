package volumemanager

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Conformance's downward API specs: a fractional CPU limit rounds up to whole divisors, and an
// unset limit is the node's allocatable.
func TestResourceFieldValueRoundsUpAndDefaultsToAllocatable(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{
		{Name: "limited", Resources: v1.ResourceRequirements{
			Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1250m"), v1.ResourceMemory: resource.MustParse("64Mi"), "hugepages-2Mi": resource.MustParse("4Mi")},
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("32Mi")}}},
		{Name: "open"},
	}}}
	alloc := v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("8Gi")}
	for _, c := range []struct{ container, resource, divisor, want string }{
		{"limited", "limits.cpu", "", "2"},
		{"limited", "limits.cpu", "1m", "1250"},
		{"limited", "requests.cpu", "", "1"},
		{"limited", "limits.memory", "1Mi", "64"},
		{"limited", "requests.memory", "1Mi", "32"},
		{"limited", "limits.hugepages-2Mi", "1Mi", "4"},
		{"open", "limits.cpu", "", "4"},
		{"open", "limits.cpu", "1m", "4000"},
		{"open", "limits.memory", "", "8589934592"},
		{"open", "limits.memory", "1Gi", "8"},
		{"open", "limits.ephemeral-storage", "", "0"}, // the node reports none, as the kubelet shows
		{"open", "requests.cpu", "", "0"},
	} {
		ref := &v1.ResourceFieldSelector{ContainerName: c.container, Resource: c.resource}
		if c.divisor != "" {
			ref.Divisor = resource.MustParse(c.divisor)
		}
		if got, err := ResourceFieldValue(pod, ref, alloc); err != nil || got != c.want {
			t.Errorf("%s %s / %q = %q, %v; want %q", c.container, c.resource, c.divisor, got, err, c.want)
		}
	}
	_, err := ResourceFieldValue(pod, &v1.ResourceFieldSelector{ContainerName: "open", Resource: "limits.memory"}, nil)
	if !errors.Is(err, ErrNoAllocatable) {
		t.Errorf("unset limit without allocatable: %v, want ErrNoAllocatable", err)
	}
	if got, err := ResourceFieldValue(pod, &v1.ResourceFieldSelector{ContainerName: "limited", Resource: "limits.cpu"}, nil); err != nil || got != "2" {
		t.Errorf("set limit without allocatable = %q, %v", got, err)
	}
	if _, err := ResourceFieldValue(pod, &v1.ResourceFieldSelector{ContainerName: "open", Resource: "limits.gpu"}, alloc); err == nil {
		t.Error("unsupported resource accepted")
	}
}

// The downwardAPI and projected volume files use the manager's Allocatable.
func TestDownwardVolumeFilesUseAllocatable(t *testing.T) {
	items := []v1.DownwardAPIVolumeFile{{Path: "cpu_limit", ResourceFieldRef: &v1.ResourceFieldSelector{ContainerName: "app", Resource: "limits.cpu"}}}
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "app"}}, Volumes: []v1.Volume{
		{Name: "dapi", VolumeSource: v1.VolumeSource{DownwardAPI: &v1.DownwardAPIVolumeSource{Items: items}}},
		{Name: "proj", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
			{DownwardAPI: &v1.DownwardAPIProjection{Items: items}}}}}},
	}}}
	m := &Manager{RootDir: t.TempDir(), Allocatable: func() v1.ResourceList {
		return v1.ResourceList{v1.ResourceCPU: resource.MustParse("3")}
	}}
	for i := range pod.Spec.Volumes {
		files, err := m.files(context.Background(), pod, &pod.Spec.Volumes[i])
		if err != nil || string(files["cpu_limit"].Data) != "3" {
			t.Errorf("%s: cpu_limit %q, %v; want 3", pod.Spec.Volumes[i].Name, files["cpu_limit"].Data, err)
		}
	}
	m.Allocatable = nil
	for i := range pod.Spec.Volumes {
		if _, err := m.files(context.Background(), pod, &pod.Spec.Volumes[i]); !errors.Is(err, ErrNoAllocatable) {
			t.Errorf("%s without allocatable: %v, want ErrNoAllocatable", pod.Spec.Volumes[i].Name, err)
		}
	}
}
