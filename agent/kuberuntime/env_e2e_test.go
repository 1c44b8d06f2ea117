package kuberuntime

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodelet/nodelet/test/harness/kubefake"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/volumemanager"
	"github.com/nodelet/nodelet/test/harness/crirt"
)

// TestEnvFromOnTheRealRuntime: the conformance specs' envFrom (config map and secret, with and
// without a prefix, keys with dashes) reaches the container's process on nodelet's runtime. The
// process is sleep itself, not a shell: busybox builds whose sh drops names that are not shell
// identifiers would hide the dashed ones.
func TestEnvFromOnTheRealRuntime(t *testing.T) {
	rt := crirt.Start(t, filepath.Join(t.TempDir(), "rt"))
	image := rt.Push(t, "busybox:envfrom", nil)
	client := fake.NewClientset(
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cm"}, Data: map[string]string{"data-1": "value-1", "DATA_2": "value-2"}},
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "sec"}, Data: map[string][]byte{"data-1": []byte("secret-1")}},
	)
	vols := &volumemanager.Manager{Client: kubefake.Wrap(client), RootDir: t.TempDir()}
	m := NewManager(Deps{Runtime: rt.RS, Images: rt.IS, RootDir: t.TempDir(), PodLogsDir: t.TempDir(), EnvData: vols})
	ctx := context.Background()
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	pod.UID = "uid-e2e-envfrom"
	pod.Spec.HostNetwork = true
	c := &pod.Spec.Containers[0]
	c.Image = image
	c.Command = []string{"sleep", "3600"}
	c.Env = []v1.EnvVar{{Name: "PLAIN", Value: "plain"}}
	c.EnvFrom = []v1.EnvFromSource{
		{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}},
		{Prefix: "p-", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}},
		{Prefix: "s-", SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}}},
	}
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
	cs, err := rt.RS.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil || len(cs.Containers) != 1 {
		t.Fatalf("containers: %v %v", cs, err)
	}
	environ := rt.Exec(t, cs.Containers[0].Id, "cat", "/proc/1/environ")
	for _, want := range []string{"PLAIN=plain", "DATA_2=value-2", "data-1=value-1", "p-data-1=value-1", "s-data-1=secret-1"} {
		if !strings.Contains(environ, want) {
			t.Errorf("process environment lacks %s: %q", want, environ)
		}
	}
}
