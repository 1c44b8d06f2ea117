package kuberuntime

import (
	"context"
	"testing"

	"github.com/nodelet/nodelet/test/harness/kubefake"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodelet/nodelet/agent/volumemanager"
)

// envFrom through the volume manager, as the agent wires it (EnvData is the volume manager).
func TestEnvFromReachesTheContainerConfig(t *testing.T) {
	client := fake.NewClientset(
		&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "cm"}, Data: map[string]string{"data-1": "value-1", "data-2": "value-2"}},
		&v1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "sec"}, Data: map[string][]byte{"data-1": []byte("secret-1")}},
	)
	f := newFixture(t)
	d := f.m.Deps
	d.EnvData = &volumemanager.Manager{Client: kubefake.Wrap(client), RootDir: t.TempDir()}
	f.m = NewManager(d)
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	c := &pod.Spec.Containers[0]
	c.EnvFrom = []v1.EnvFromSource{
		{ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}},
		{Prefix: "p-", ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}},
		{Prefix: "s-", SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "sec"}}},
	}
	cfg, err := f.m.generateContainerConfig(context.Background(), pod, c, 0, "x", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range cfg.Envs {
		got[kv.Key] = string(kv.Value)
	}
	for k, v := range map[string]string{"data-1": "value-1", "data-2": "value-2", "p-data-1": "value-1", "s-data-1": "secret-1"} {
		if got[k] != v {
			t.Errorf("%s=%q, want %q (env %v)", k, got[k], v, got)
		}
	}
}
