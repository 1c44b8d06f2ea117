package kuberuntime

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestSandboxResources(t *testing.T) {
	rl := func(kv ...string) v1.ResourceList {
		out := v1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[v1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	mk := func(overhead v1.ResourceList, rs ...v1.ResourceRequirements) *v1.Pod {
		p := &v1.Pod{Spec: v1.PodSpec{Overhead: overhead}}
		for i, r := range rs {
			p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: fmt.Sprint("c", i), Resources: r})
		}
		return p
	}
	show := func(r *runtimeapi.LinuxContainerResources) string {
		return fmt.Sprintf("shares=%d quota=%d period=%d memory=%d", r.CpuShares, r.CpuQuota, r.CpuPeriod, r.MemoryLimitInBytes)
	}
	for _, tc := range []struct {
		name                string
		pod                 *v1.Pod
		resources, overhead string
	}{
		{"besteffort, no overhead", mk(nil, v1.ResourceRequirements{}),
			"shares=2 quota=0 period=100000 memory=0", "shares=0 quota=0 period=0 memory=0"},
		{"guaranteed: the sum of the containers, the overhead apart",
			mk(rl("cpu", "250m", "memory", "160Mi"),
				v1.ResourceRequirements{Requests: rl("cpu", "1", "memory", "1Gi"), Limits: rl("cpu", "1", "memory", "1Gi")},
				v1.ResourceRequirements{Requests: rl("cpu", "500m", "memory", "512Mi"), Limits: rl("cpu", "500m", "memory", "512Mi")}),
			"shares=1536 quota=150000 period=100000 memory=1610612736", "shares=256 quota=25000 period=100000 memory=167772160"},
		{"a limit without a request gives the shares",
			mk(nil, v1.ResourceRequirements{Limits: rl("cpu", "2")}),
			"shares=2048 quota=200000 period=100000 memory=0", "shares=0 quota=0 period=0 memory=0"},
		{"overhead of memory only", mk(rl("memory", "64Mi"), v1.ResourceRequirements{Requests: rl("cpu", "100m")}),
			"shares=102 quota=0 period=100000 memory=0", "shares=2 quota=0 period=100000 memory=67108864"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, over := sandboxResources(tc.pod)
			if got := show(res); got != tc.resources {
				t.Errorf("resources %s, want %s", got, tc.resources)
			}
			if got := show(over); got != tc.overhead {
				t.Errorf("overhead %s, want %s", got, tc.overhead)
			}
		})
	}
}

func TestSandboxConfigCarriesPodResources(t *testing.T) {
	f := newFixture(t)
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.Overhead = v1.ResourceList{v1.ResourceMemory: resource.MustParse("100Mi")}
	pod.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("200Mi")}
	sb, err := f.m.generatePodSandboxConfig(context.Background(), pod, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := sb.Linux.GetResources().GetMemoryLimitInBytes(); got != 200<<20 {
		t.Errorf("sandbox memory %d, want the containers' 200Mi without the overhead", got)
	}
	if got := sb.Linux.GetOverhead().GetMemoryLimitInBytes(); got != 100<<20 {
		t.Errorf("sandbox overhead memory %d, want 100Mi", got)
	}
}
