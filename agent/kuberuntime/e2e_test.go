package kuberuntime

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/test/harness/crirt"
)

// TestRunAsNonRootOnTheRealRuntime: the busybox image names no user, so nodelet's runtime reports
// none in ImageStatus and the container would run as root; with runAsNonRoot it is not created.
// With runAsUser 1000 it starts and runs as 1000.
func TestRunAsNonRootOnTheRealRuntime(t *testing.T) {
	rt := crirt.Start(t, filepath.Join(t.TempDir(), "rt"))
	image := rt.Push(t, "busybox:nonroot", nil)
	m := NewManager(Deps{Runtime: rt.RS, Images: rt.IS, RootDir: t.TempDir(), PodLogsDir: t.TempDir(), CgroupRoot: ""})
	ctx := context.Background()
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.UID = "uid-e2e-nonroot"
	pod.Spec.HostNetwork = true
	pod.Spec.Containers[0].Image = image
	pod.Spec.Containers[0].Command = []string{"sleep", "3600"}
	pod.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: boolPtr(true)}
	t.Cleanup(func() {
		st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err == nil {
			zero := int64(0)
			m.KillPod(ctx, pod, st, &zero)
			m.RemovePod(ctx, st)
		}
	})
	sync := func() error {
		st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		return m.SyncPod(ctx, pod, st)
	}

	if err := sync(); !errors.Is(err, kubecontainer.ErrCreateConfig) {
		t.Fatalf("sync: %v, want CreateContainerConfigError", err)
	}
	want := `container has runAsNonRoot and image will run as root (pod: "web_default(uid-e2e-nonroot)", container: app)`
	if r, _ := m.Reasons.Get(pod.UID, "app"); r.Reason != kubecontainer.ReasonCreateConfigError || r.Message != want {
		t.Fatalf("waiting reason %+v, want %q", r, want)
	}
	cs, err := rt.RS.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(cs.Containers) != 0 {
		t.Fatalf("containers created: %v %v", cs, err)
	}

	pod.Spec.SecurityContext.RunAsUser = i64Ptr(1000)
	if err := sync(); err != nil {
		t.Fatal(err)
	}
	cs, err = rt.RS.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(cs.Containers) != 1 {
		t.Fatalf("containers: %v %v", cs, err)
	}
	if out := rt.Exec(t, cs.Containers[0].Id, "id", "-u"); strings.TrimSpace(out) != "1000" {
		t.Fatalf("runs as %q", out)
	}
}
