package kuberuntime

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/test/harness/crirt"
)

// TestEphemeralContainerOnTheRealRuntime is `kubectl debug --target=app` on nodelet's runtime: the
// running pod gets a debug container that sees the app's process as its PID 1, and one without a
// target that sees only itself. Both run once; the app keeps running.
func TestEphemeralContainerOnTheRealRuntime(t *testing.T) {
	rt := crirt.Start(t, filepath.Join(t.TempDir(), "rt"))
	image := rt.Push(t, "busybox:debug", nil)
	m := NewManager(Deps{Runtime: rt.RS, Images: rt.IS, RootDir: t.TempDir(), PodLogsDir: t.TempDir()})
	ctx := context.Background()
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.UID = "uid-e2e-ephemeral"
	pod.Spec.HostNetwork = true
	pod.Spec.Containers[0].Image = image
	pod.Spec.Containers[0].Command = []string{"sleep", "3600"}
	t.Cleanup(func() {
		st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err == nil {
			zero := int64(0)
			m.KillPod(ctx, pod, st, &zero)
			m.RemovePod(ctx, st)
		}
	})
	status := func() *kubecontainer.PodStatus {
		st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if err := m.SyncPod(ctx, pod, status()); err != nil {
		t.Fatal(err)
	}
	app := status().FindContainerStatusByName("app")
	if app == nil || app.State != kubecontainer.StateRunning {
		t.Fatalf("app: %+v", app)
	}

	// What each sees as PID 1 comes back as its termination message.
	show := []string{"sh", "-c", `tr '\0' ' ' < /proc/1/cmdline > /dev/termination-log`}
	pod = withDebug(pod, "app", "debugger")
	pod = withDebug(pod, "", "alone")
	for i := range pod.Spec.EphemeralContainers {
		pod.Spec.EphemeralContainers[i].Image = image
		pod.Spec.EphemeralContainers[i].Command = show
	}
	if err := m.SyncPod(ctx, pod, status()); err != nil {
		t.Fatal(err)
	}
	got := map[string]*kubecontainer.Status{}
	for deadline := time.Now().Add(30 * time.Second); len(got) < 2; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("debug containers did not finish: %v", got)
		}
		for _, cs := range status().ContainerStatuses {
			if cs.State == kubecontainer.StateExited {
				got[cs.Name] = cs
			}
		}
	}
	if c := got["debugger"]; c.ExitCode != 0 || strings.TrimSpace(c.Message) != "sleep 3600" {
		t.Errorf("debugger: exit %d, PID 1 is %q, want the app's sleep 3600", c.ExitCode, c.Message)
	}
	// Its own command is PID 1 (the shell has exec'd tr, its last command).
	if c := got["alone"]; c.ExitCode != 0 || !strings.HasPrefix(c.Message, "tr ") {
		t.Errorf("alone: exit %d, PID 1 is %q, want its own command", c.ExitCode, c.Message)
	}

	// Exited debug containers stay exited, and the app was never touched.
	if err := m.SyncPod(ctx, pod, status()); err != nil {
		t.Fatal(err)
	}
	st := status()
	if n := len(st.ContainerStatuses); n != 3 {
		t.Errorf("%d containers after a second sync, want 3", n)
	}
	if a := st.FindContainerStatusByName("app"); a.ID != app.ID || a.State != kubecontainer.StateRunning {
		t.Errorf("app: %+v", a)
	}
}
