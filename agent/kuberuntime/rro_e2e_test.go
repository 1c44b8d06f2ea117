package kuberuntime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/kubecontainer"

	"github.com/nodelet/nodelet/test/harness/crirt"
	"github.com/nodelet/nodelet/test/harness/testutil"
)

// TestRecursiveReadOnlyOnTheRealRuntime: a read-only hostPath volume with a tmpfs mounted below it
// is read-only at that submount too with recursiveReadOnly Enabled or IfPossible, and writable
// there with Disabled (a plain read-only bind makes only its top read-only), on runc and crun.
func TestRecursiveReadOnlyOnTheRealRuntime(t *testing.T) {
	rt := crirt.Start(t, filepath.Join(t.TempDir(), "rt"))
	image := rt.Push(t, "busybox:rro", nil)
	host := t.TempDir()
	sub := filepath.Join(host, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", sub, "tmpfs", 0, "size=1m,mode=0755"); err != nil {
		t.Fatalf("mount a tmpfs below the volume: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(sub, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", sub, err)
		}
	})
	m := NewManager(Deps{Runtime: rt.RS, Images: rt.IS, RootDir: t.TempDir(), PodLogsDir: t.TempDir()})
	for i, handler := range []string{"", "crun"} {
		name := handler
		if name == "" {
			name = "runc"
		}
		t.Run(name, func(t *testing.T) {
			pod := testPod(v1.RestartPolicyAlways, nil, "app")
			pod.UID = types.UID("uid-e2e-rro-" + strconv.Itoa(i))
			pod.Spec.HostNetwork = true
			if handler != "" {
				pod.Spec.RuntimeClassName = &handler
			}
			dir := v1.HostPathDirectory
			pod.Spec.Volumes = []v1.Volume{{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: host, Type: &dir}}}}
			c := &pod.Spec.Containers[0]
			c.Image, c.Command = image, []string{"sleep", "3600"}
			for _, mode := range []v1.RecursiveReadOnlyMode{v1.RecursiveReadOnlyDisabled, v1.RecursiveReadOnlyIfPossible, v1.RecursiveReadOnlyEnabled} {
				mode := mode
				c.VolumeMounts = append(c.VolumeMounts, v1.VolumeMount{Name: "host", MountPath: "/" + strings.ToLower(string(mode)),
					ReadOnly: true, RecursiveReadOnly: &mode})
			}
			id := runOnRealRuntime(t, m, rt, pod)
			writable := func(p string) bool {
				out, code, err := rt.ExecCode(id, "touch", p)
				if err != nil {
					t.Fatalf("exec touch %s: %v", p, err)
				}
				if code != 0 && !strings.Contains(out, "Read-only file system") {
					t.Fatalf("touch %s: exit %d: %s", p, code, out)
				}
				return code == 0
			}
			for _, mode := range []string{"disabled", "ifpossible", "enabled"} {
				if writable("/" + mode + "/top") {
					t.Errorf("%s: the volume itself is writable", mode)
				}
			}
			if !writable("/disabled/sub/file") {
				t.Error("Disabled: the submount is read-only, want it as it is on the host (writable)")
			}
			if writable("/ifpossible/sub/file") {
				t.Error("IfPossible on a handler that supports it: the submount is writable")
			}
			if writable("/enabled/sub/file") {
				t.Error("Enabled: the submount is writable")
			}
		})
	}
}

// TestRecursiveReadOnlyRefusedOnTheRealRuntime: runsc, which nodelet's runtime lists without
// recursive read-only support, gets no container for an Enabled mount: the kubelet's
// CreateContainerConfigError and message, and nothing created.
func TestRecursiveReadOnlyRefusedOnTheRealRuntime(t *testing.T) {
	testutil.Require(t, "runsc")
	rt := crirt.Start(t, filepath.Join(t.TempDir(), "rt"))
	image := rt.Push(t, "busybox:rro-refused", nil)
	m := NewManager(Deps{Runtime: rt.RS, Images: rt.IS, RootDir: t.TempDir(), PodLogsDir: t.TempDir()})
	ctx := context.Background()
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.UID = "uid-e2e-rro-refused"
	pod.Spec.HostNetwork = true
	handler := "runsc"
	pod.Spec.RuntimeClassName = &handler
	dir := v1.HostPathDirectory
	pod.Spec.Volumes = []v1.Volume{{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: t.TempDir(), Type: &dir}}}}
	c := &pod.Spec.Containers[0]
	c.Image, c.Command = image, []string{"sleep", "3600"}
	enabled := v1.RecursiveReadOnlyEnabled
	c.VolumeMounts = []v1.VolumeMount{{Name: "host", MountPath: "/h", ReadOnly: true, RecursiveReadOnly: &enabled}}
	t.Cleanup(func() {
		if st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace); err == nil {
			zero := int64(0)
			m.KillPod(ctx, pod, st, &zero)
			m.RemovePod(ctx, st)
		}
	})
	st, err := m.GetPodStatus(ctx, pod.UID, pod.Name, pod.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SyncPod(ctx, pod, st); !errors.Is(err, kubecontainer.ErrCreateConfig) {
		t.Fatalf("sync: %v, want CreateContainerConfigError", err)
	}
	want := `failed to resolve recursive read-only mode: volume "host" requested recursive read-only mode, but it is not supported by the runtime`
	if r, _ := m.Reasons.Get(pod.UID, "app"); r.Reason != kubecontainer.ReasonCreateConfigError || r.Message != want {
		t.Fatalf("waiting reason %+v, want %q", r, want)
	}
	cs, err := rt.RS.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(cs.Containers) != 0 {
		t.Fatalf("containers created: %v %v", cs, err)
	}
	if m.SupportsRecursiveReadOnlyMounts(ctx, pod) {
		t.Fatal("the status would report Enabled on runsc")
	}
}
