package kuberuntime

import (
	"errors"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

// withDebug adds `kubectl debug --target=<target>` containers to a copy of pod, as the
// ephemeralcontainers subresource does (defaulted).
func withDebug(pod *v1.Pod, target string, names ...string) *v1.Pod {
	p := pod.DeepCopy()
	for _, n := range names {
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, v1.EphemeralContainer{
			TargetContainerName: target,
			EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: n, Image: "busybox", ImagePullPolicy: v1.PullIfNotPresent,
				TerminationMessagePath: v1.TerminationMessagePathDefault, TerminationMessagePolicy: v1.TerminationMessageReadFile},
		})
	}
	return p
}

func TestComputePodActionsEphemeral(t *testing.T) {
	app := withDebug(testPod(v1.RestartPolicyAlways, nil, "app"), "app", "dbg")
	initing := withDebug(testPod(v1.RestartPolicyAlways, []string{"init"}, "app"), "init", "dbg")
	done := withDebug(testPod(v1.RestartPolicyNever, nil, "app"), "app", "dbg")
	two := withDebug(app, "", "dbg2")
	changed := app.DeepCopy()
	changed.Spec.EphemeralContainers[0].Image = "busybox:2"
	ready := []*runtimeapi.PodSandboxStatus{sandbox("sb", 0, true)}

	tests := []struct {
		name       string
		pod        *v1.Pod
		containers []*kubecontainer.Status
		wantStart  []int
		wantKill   []string
		killPod    bool
	}{
		{"never ran: started", app, []*kubecontainer.Status{running(app, "app")}, []int{0}, nil, false},
		{"running: left alone", app, []*kubecontainer.Status{running(app, "app"), running(app, "dbg")}, nil, nil, false},
		{"exited: never restarted", app, []*kubecontainer.Status{running(app, "app"), exited(app, "dbg", 1)}, nil, nil, false},
		{"spec changed: not killed", changed, []*kubecontainer.Status{running(app, "app"), running(app, "dbg")}, nil, nil, false},
		{"only the new one of two", two, []*kubecontainer.Status{running(two, "app"), exited(two, "dbg", 0)}, []int{1}, nil, false},
		{"while an init container runs", initing, []*kubecontainer.Status{running(initing, "init")}, []int{0}, nil, false},
		// The pod's own containers have finished: a debug container does not keep it going.
		{"pod finished", done, []*kubecontainer.Status{exited(done, "app", 0), running(done, "dbg")}, nil, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &kubecontainer.PodStatus{SandboxStatuses: ready, ContainerStatuses: tt.containers}
			got := computePodActions(tt.pod, st, nil, nil)
			if !slices.Equal(got.EphemeralContainersToStart, tt.wantStart) {
				t.Errorf("ephemeral to start %v, want %v (%s)", got.EphemeralContainersToStart, tt.wantStart, got)
			}
			var kill []string
			for _, k := range got.ContainersToKill {
				kill = append(kill, k.Name)
			}
			if !slices.Equal(kill, tt.wantKill) || got.KillPod != tt.killPod {
				t.Errorf("kill %v killPod %v, want %v %v", kill, got.KillPod, tt.wantKill, tt.killPod)
			}
		})
	}
}

// The conformance scenario on the fake runtime: a running pod gets a debug container targeting its
// app container; it runs in the app's process namespace, once.
func TestSyncPodStartsEphemeralContainerInTargetPIDNamespace(t *testing.T) {
	f := newFixture(t)
	f.cri.AddImage("busybox")
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Image = "busybox"
	f.mustSync(pod)
	appID := f.cri.RunningContainer("app")

	started := func() float64 {
		return counter(t, "kubelet_started_containers_total", map[string]string{"container_type": "ephemeral_container"})
	}
	before := started()
	debug := withDebug(pod, "app", "debugger")
	f.cri.ResetCalls()
	f.mustSync(debug)
	if got, want := f.cri.Calls(), []string{"CreateContainer web/debugger", "StartContainer debugger"}; !slices.Equal(got, want) {
		t.Fatalf("calls %q, want %q", got, want)
	}
	id := f.cri.RunningContainer("debugger")
	ns := f.cri.ContainerConfig(id).GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns.GetPid() != runtimeapi.NamespaceMode_TARGET || ns.GetTargetId() != appID {
		t.Errorf("pid namespace %v target %q, want TARGET %q", ns.GetPid(), ns.GetTargetId(), appID)
	}
	cfg := f.cri.ContainerConfig(id)
	if cfg.Labels[kubecontainer.LabelContainerName] != "debugger" || cfg.Labels[kubecontainer.LabelPodUID] != string(pod.UID) ||
		cfg.Annotations[AnnotationContainerHash] == "" || cfg.LogPath != "debugger/0.log" {
		t.Errorf("labels %v annotations %v log %q", cfg.Labels, cfg.Annotations, cfg.LogPath)
	}
	if d := started() - before; d != 1 {
		t.Errorf("started ephemeral containers +%v, want +1", d)
	}
	if st := f.status(debug).FindContainerStatusByName("debugger"); st == nil || st.State != kubecontainer.StateRunning {
		t.Fatalf("debugger status %+v", st)
	}

	// Once it exits, it stays exited; the app container is untouched throughout.
	f.cri.ExitContainer(id, 0)
	f.cri.ResetCalls()
	f.mustSync(debug)
	f.mustSync(debug)
	if got := f.cri.Calls(); len(got) != 0 {
		t.Fatalf("sync after the debug container exited made calls %q", got)
	}
	if f.cri.RunningContainer("app") != appID {
		t.Fatal("app container restarted")
	}

	// It is killed with the pod.
	f.cri.ResetCalls()
	more := withDebug(debug, "", "shell")
	f.mustSync(more)
	if err := f.m.KillPod(t.Context(), more, f.status(more), nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range f.cri.Containers() {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("%s still running after KillPod", c.Metadata.Name)
		}
	}
}

func TestEphemeralContainerNamespaces(t *testing.T) {
	f := newFixture(t)
	f.cri.AddImage("busybox")
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Image = "busybox"
	f.mustSync(pod)
	f.mustSync(withDebug(withDebug(pod, "app", "targeted"), "", "untargeted"))
	for name, want := range map[string]runtimeapi.NamespaceMode{
		"targeted":   runtimeapi.NamespaceMode_TARGET,
		"untargeted": runtimeapi.NamespaceMode_CONTAINER,
	} {
		ns := f.cri.ContainerConfig(f.cri.RunningContainer(name)).GetLinux().GetSecurityContext().GetNamespaceOptions()
		if ns.GetPid() != want || (want != runtimeapi.NamespaceMode_TARGET && ns.GetTargetId() != "") {
			t.Errorf("%s: pid %v target %q, want %v", name, ns.GetPid(), ns.GetTargetId(), want)
		}
	}

	// A pod sharing its process namespace keeps sharing it: the target is visible already.
	f2 := newFixture(t)
	f2.cri.AddImage("busybox")
	shared := true
	pod.Spec.ShareProcessNamespace = &shared
	f2.mustSync(pod)
	f2.mustSync(withDebug(pod, "app", "dbg"))
	ns := f2.cri.ContainerConfig(f2.cri.RunningContainer("dbg")).GetLinux().GetSecurityContext().GetNamespaceOptions()
	if ns.GetPid() != runtimeapi.NamespaceMode_POD || ns.GetTargetId() != "" {
		t.Errorf("shared pid namespace: pid %v target %q, want POD", ns.GetPid(), ns.GetTargetId())
	}
}

// A debug container the API server should have refused is not run; the pod's own containers and
// the valid debug containers are not held back by it.
func TestSyncPodRefusesInvalidEphemeralContainer(t *testing.T) {
	f := newFixture(t)
	f.cri.AddImage("busybox")
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Image = "busybox"
	debug := withDebug(pod, "app", "bad", "good")
	debug.Spec.EphemeralContainers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, Protocol: v1.ProtocolTCP}}
	f.mustSync(pod)
	err := f.sync(debug)
	if !errors.Is(err, kubecontainer.ErrCreateConfig) {
		t.Fatalf("sync: %v, want CreateContainerConfigError", err)
	}
	if r, _ := f.m.Reasons.Get(pod.UID, "bad"); r.Reason != kubecontainer.ReasonCreateConfigError {
		t.Errorf("waiting reason %+v", r)
	}
	if f.cri.RunningContainer("bad") != "" || f.cri.RunningContainer("good") == "" || f.cri.RunningContainer("app") == "" {
		t.Errorf("containers %v", f.cri.Containers())
	}
}
