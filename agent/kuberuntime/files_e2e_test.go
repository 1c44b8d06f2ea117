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

// TestTerminationMessageAndHostsOnTheRealRuntime: a non-root container writes its termination
// message to a non-default path; what it wrote, here its /etc/hosts (the agent's, with the pod's
// alias), comes back as its message. A second container fails with only its log to tell why.
func TestTerminationMessageAndHostsOnTheRealRuntime(t *testing.T) {
	rt := crirt.Start(t, filepath.Join(t.TempDir(), "rt"))
	image := rt.Push(t, "busybox:files", nil)
	m := NewManager(Deps{Runtime: rt.RS, Images: rt.IS, RootDir: t.TempDir(), PodLogsDir: t.TempDir()})
	ctx := context.Background()
	pod := testPod(v1.RestartPolicyNever, nil, "msg", "fallback")
	pod.UID = "uid-e2e-files"
	pod.Spec.HostNetwork = true
	pod.Spec.HostAliases = []v1.HostAlias{{IP: "123.45.67.89", Hostnames: []string{"foo.example", "bar"}}}
	msg := &pod.Spec.Containers[0]
	msg.Image = image
	msg.Command = []string{"sh", "-c", "cat /etc/hosts > /dev/termination-custom-log"}
	msg.TerminationMessagePath = "/dev/termination-custom-log"
	msg.TerminationMessagePolicy = v1.TerminationMessageReadFile
	msg.SecurityContext = &v1.SecurityContext{RunAsUser: i64Ptr(1000)}
	fb := &pod.Spec.Containers[1]
	fb.Image = image
	fb.Command = []string{"sh", "-c", "echo first; echo last words; exit 3"}
	fb.TerminationMessagePath = "/dev/termination-log"
	fb.TerminationMessagePolicy = v1.TerminationMessageFallbackToLogsOnError
	t.Cleanup(func() {
		st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err == nil {
			zero := int64(0)
			m.KillPod(ctx, pod, st, &zero)
			m.RemovePod(ctx, st)
		}
	})
	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SyncPod(ctx, pod, st); err != nil {
		t.Fatal(err)
	}
	got := map[string]*kubecontainer.Status{}
	for deadline := time.Now().Add(30 * time.Second); len(got) < 2; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("containers did not exit: %v", got)
		}
		st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		for _, cs := range st.ContainerStatuses {
			if cs.State == kubecontainer.StateExited {
				got[cs.Name] = cs
			}
		}
	}
	if c := got["msg"]; c.ExitCode != 0 || !strings.HasPrefix(c.Message, "# Kubernetes-managed hosts file (host network).\n") ||
		!strings.HasSuffix(c.Message, "\n# Entries added by HostAliases.\n123.45.67.89\tfoo.example\tbar\n") {
		t.Errorf("msg: exit %d message %q", c.ExitCode, c.Message)
	}
	if c := got["fallback"]; c.ExitCode != 3 || c.Message != "first\nlast words\n" {
		t.Errorf("fallback: exit %d message %q", c.ExitCode, c.Message)
	}
}
