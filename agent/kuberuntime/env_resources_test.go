package kuberuntime

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodelet/nodelet/agent/volumemanager"
)

// Conformance's "Downward API should provide container's limits.cpu/memory and requests.cpu/memory
// as env vars" and "…default limits.cpu/memory from node allocatable".
func TestEnvResourceFieldRef(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, nil, "limited", "open")
	pod.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Limits:   v1.ResourceList{v1.ResourceCPU: resource.MustParse("1250m"), v1.ResourceMemory: resource.MustParse("64Mi")},
		Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m"), v1.ResourceMemory: resource.MustParse("32Mi")}}
	ref := func(container, res, divisor string) v1.EnvVar {
		r := &v1.ResourceFieldSelector{ContainerName: container, Resource: res}
		if divisor != "" {
			r.Divisor = resource.MustParse(divisor)
		}
		return v1.EnvVar{Name: container + "_" + res + "_" + divisor, ValueFrom: &v1.EnvVarSource{ResourceFieldRef: r}}
	}
	for i := range pod.Spec.Containers {
		pod.Spec.Containers[i].Env = []v1.EnvVar{ref("", "limits.cpu", ""), ref("", "limits.memory", "1Mi"), ref("", "requests.cpu", "1m")}
	}
	pod.Spec.Containers[1].Env = append(pod.Spec.Containers[1].Env, ref("limited", "limits.cpu", "1m"))
	m := NewManager(Deps{Allocatable: func() v1.ResourceList {
		return v1.ResourceList{v1.ResourceCPU: resource.MustParse("4"), v1.ResourceMemory: resource.MustParse("2Gi")}
	}})
	for i, want := range []map[string]string{
		{"_limits.cpu_": "2", "_limits.memory_1Mi": "64", "_requests.cpu_1m": "250"},
		{"_limits.cpu_": "4", "_limits.memory_1Mi": "2048", "_requests.cpu_1m": "0", "limited_limits.cpu_1m": "1250"},
	} {
		_, vals, err := m.makeEnv(context.Background(), pod, &pod.Spec.Containers[i], nil)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range want {
			if vals[k] != v {
				t.Errorf("container %s: %s=%q, want %q", pod.Spec.Containers[i].Name, k, vals[k], v)
			}
		}
	}
	// Without the node's allocatable an unset limit is an error, not a made-up 0.
	m = NewManager(Deps{})
	if _, _, err := m.makeEnv(context.Background(), pod, &pod.Spec.Containers[1], nil); !errors.Is(err, volumemanager.ErrNoAllocatable) {
		t.Errorf("no allocatable: %v, want ErrNoAllocatable", err)
	}
	if _, vals, err := m.makeEnv(context.Background(), pod, &pod.Spec.Containers[0], nil); err != nil || vals["_limits.cpu_"] != "2" {
		t.Errorf("set limits without allocatable: %v %v", vals, err)
	}
}
