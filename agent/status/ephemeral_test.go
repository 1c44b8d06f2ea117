package status

import (
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/harness/kubefake"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
)

func withDebug(p *v1.Pod, names ...string) *v1.Pod {
	p = p.DeepCopy()
	for _, n := range names {
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, v1.EphemeralContainer{
			TargetContainerName:      "a",
			EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: n, Image: "busybox:dbg"}})
	}
	return p
}

func TestGenerateEphemeralContainerStatuses(t *testing.T) {
	R, E := kubecontainer.StateRunning, kubecontainer.StateExited
	pod := withDebug(mkPod(v1.RestartPolicyAlways, nil, "a"), "running", "exited", "pulling")
	pulling := kubecontainer.NewReasonCache()
	pulling.Update("u1", "pulling", kubecontainer.ErrImagePull)
	// The reason cache may still hold an old error for the exited one: it is not restarted, so it
	// is not waiting either.
	pulling.Update("u1", "exited", kubecontainer.ErrCrashLoopBackOff)
	s := Generate(pod, ps(c("a", R, 0, 0), c("running", R, 0, 0), c("exited", E, 1, 0)), v1.PodStatus{},
		Inputs{Reasons: pulling, RuntimeName: "fake", Now: time.Unix(2000, 0)})

	if len(s.EphemeralContainerStatuses) != 3 {
		t.Fatalf("ephemeral statuses %+v", s.EphemeralContainerStatuses)
	}
	run, exit, pull := s.EphemeralContainerStatuses[0], s.EphemeralContainerStatuses[1], s.EphemeralContainerStatuses[2]
	if run.Name != "running" || run.State.Running == nil || run.Image != "busybox:dbg" || run.ImageID != "sha256:img" ||
		run.ContainerID != "fake://running-id" || run.RestartCount != 0 || run.Ready || run.Started != nil {
		t.Errorf("running: %+v", run)
	}
	if exit.State.Terminated == nil || exit.State.Terminated.ExitCode != 1 || exit.State.Terminated.Reason != "Error" || exit.Ready {
		t.Errorf("exited: %+v", exit)
	}
	if pull.State.Waiting == nil || pull.State.Waiting.Reason != kubecontainer.ReasonErrImagePull || pull.ContainerID != "" {
		t.Errorf("pulling: %+v", pull)
	}
	// Not the pod's business: it runs and is ready with its one app container.
	if s.Phase != v1.PodRunning || condition(s, v1.PodReady).Status != v1.ConditionTrue || condition(s, v1.ContainersReady).Status != v1.ConditionTrue {
		t.Errorf("phase %s ready %s containersReady %s", s.Phase, condition(s, v1.PodReady).Status, condition(s, v1.ContainersReady).Status)
	}
	if len(s.ContainerStatuses) != 1 || len(s.InitContainerStatuses) != 0 {
		t.Errorf("app %v init %v", s.ContainerStatuses, s.InitContainerStatuses)
	}

	// A job whose container finished has finished, whatever a debug container still does.
	job := withDebug(mkPod(v1.RestartPolicyNever, nil, "a"), "running")
	s = Generate(job, ps(c("a", E, 0, 0), c("running", R, 0, 0)), v1.PodStatus{}, Inputs{Reasons: kubecontainer.NewReasonCache(), Now: time.Unix(2000, 0)})
	if s.Phase != v1.PodSucceeded {
		t.Errorf("job phase %s, want Succeeded", s.Phase)
	}
}

// The apiserver keeps seconds: a debug container's times are truncated like the others', or
// every status read back would differ from the one computed and be patched again.
func TestManagerNormalizesEphemeralContainerTimes(t *testing.T) {
	pod := withDebug(mkPod(v1.RestartPolicyAlways, nil, "a"), "dbg")
	m := NewManager(kubefake.New(pod.DeepCopy()), mirrors{}, nil)
	gen := func(nanos int) v1.PodStatus {
		d := c("dbg", kubecontainer.StateRunning, 0, 0)
		d.StartedAt = d.StartedAt.Add(time.Duration(nanos))
		return Generate(pod, ps(c("a", kubecontainer.StateRunning, 0, 0), d), v1.PodStatus{},
			Inputs{Reasons: kubecontainer.NewReasonCache(), Now: time.Unix(2000, 0)})
	}
	if !m.SetPodStatus(pod, gen(1)) {
		t.Fatal("first status not a change")
	}
	if m.SetPodStatus(pod, gen(2)) {
		t.Fatal("a sub-second difference in the debug container's start counted as a change")
	}
}
