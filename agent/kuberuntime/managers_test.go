package kuberuntime

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

func TestPostStartHook(t *testing.T) {
	f := newFixture(t)
	rec := record.NewFakeRecorder(100)
	d := f.m.Deps
	d.Recorder = rec
	f.m = NewManager(d)
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"warm-up"}}}}
	f.mustSync(pod)
	want := []string{"RunPodSandbox web", "PullImage busybox:latest", "CreateContainer web/a", "StartContainer a", "ExecSync a [warm-up]"}
	if got := f.cri.Calls(); !slices.Equal(got, want) {
		t.Fatalf("calls %q, want %q", got, want)
	}

	// A failing hook kills the container and the sync reports it.
	pod2 := testPod(v1.RestartPolicyAlways, nil, "b")
	pod2.UID, pod2.Name = "uid-2", "web2"
	pod2.Spec.Containers[0].Lifecycle = pod.Spec.Containers[0].Lifecycle
	f.cri.SetExecExitCode(1)
	f.cri.ResetCalls()
	err := f.sync(pod2)
	if !errors.Is(err, kubecontainer.ErrRunContainer) || !strings.Contains(err.Error(), "PostStartHookError") {
		t.Fatalf("sync with a failing postStart: %v", err)
	}
	if got := f.cri.CallsWithPrefix("StopContainer"); len(got) != 1 || !strings.HasPrefix(got[0], "StopContainer b") {
		t.Fatalf("stops %q", got)
	}
	found := false
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.HasPrefix(e, "Warning FailedPostStartHook") {
			found = true
		}
	}
	if !found {
		t.Fatal("no FailedPostStartHook event")
	}
}

type fakeSubPaths struct{ calls []string }

func (f *fakeSubPaths) SubPath(pod *v1.Pod, container string, index int, volume, volumeHostPath, subPath string) (string, error) {
	f.calls = append(f.calls, container+" "+volume+" "+subPath)
	if strings.Contains(subPath, "..") {
		return "", errors.New("invalid subPath")
	}
	return "/bind/" + subPath, nil
}

func TestSubPathsGoThroughTheVolumeManager(t *testing.T) {
	f := newFixture(t)
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	c := &pod.Spec.Containers[0]
	c.Env = []v1.EnvVar{{Name: "POD", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}
	c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/logs", SubPathExpr: "logs/$(POD)"}, {Name: "data", MountPath: "/cfg", SubPath: "cfg"}}
	if _, err := f.m.generateContainerConfig(context.Background(), pod, c, 0, "x", nil); err == nil {
		t.Fatal("subPath accepted without a volume manager")
	}
	sp := &fakeSubPaths{}
	f.m.SubPaths = sp
	cfg, err := f.m.generateContainerConfig(context.Background(), pod, c, 0, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{cfg.Mounts[0].HostPath, cfg.Mounts[1].HostPath}; !slices.Equal(got, []string{"/bind/logs/web", "/bind/cfg"}) {
		t.Fatalf("mounts %q (calls %q)", got, sp.calls)
	}
	c.VolumeMounts[1].SubPath = "../escape"
	if _, err := f.m.generateContainerConfig(context.Background(), pod, c, 0, "x", nil); err == nil {
		t.Fatal("bad subPath accepted")
	}
}

type unhealthyWithGrace struct {
	unhealthy
	grace int64
}

func (u unhealthyWithGrace) KillGracePeriod(string) *int64 { return &u.grace }

func TestLivenessKillUsesTheProbesGracePeriod(t *testing.T) {
	f := newFixture(t)
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	long := int64(300)
	pod.Spec.TerminationGracePeriodSeconds = &long
	f.mustSync(pod)
	id := f.cri.RunningContainer("a")
	f.m.Probes = unhealthyWithGrace{unhealthy{id: "failed liveness probe"}, 5}
	f.cri.ResetCalls()
	f.sync(pod)
	if got := f.cri.CallsWithPrefix("StopContainer"); !slices.Equal(got, []string{"StopContainer a timeout=5"}) {
		t.Fatalf("stops %q, want the probe's 5s", got)
	}
}

func TestComputePodActionsSidecarLiveness(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, []string{"side"}, "a")
	always := v1.ContainerRestartPolicyAlways
	pod.Spec.InitContainers[0].RestartPolicy = &always
	status := &kubecontainer.PodStatus{ID: "uid-1", SandboxStatuses: []*runtimeapi.PodSandboxStatus{sandbox("sb1", 0, true)},
		ContainerStatuses: []*kubecontainer.Status{running(pod, "side"), running(pod, "a")}}
	if got := computePodActions(pod, status, unhealthy{}, nil); len(got.ContainersToKill) != 0 || got.NextInitContainerToStart != nil {
		t.Fatalf("healthy sidecar: %s", got)
	}
	got := computePodActions(pod, status, unhealthyWithGrace{unhealthy{"id-side": "failed liveness probe"}, 3}, nil)
	k, ok := got.ContainersToKill["id-side"]
	if !ok || got.NextInitContainerToStart != &pod.Spec.InitContainers[0] || k.GracePeriod == nil || *k.GracePeriod != 3 || len(got.ContainersToKill) != 1 {
		t.Fatalf("unhealthy sidecar: %s %+v", got, got.ContainersToKill)
	}
}
