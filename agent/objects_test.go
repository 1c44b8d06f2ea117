package agent

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodelet/nodelet/agent/internal/kubeletconfig"
	"github.com/nodelet/nodelet/test/harness/kubefake"
)

// TestClusterPodObjectsFollowTheStrategy: a pod's env from a Secret and a ConfigMap reaches its
// container; under Watch (the default) the agent never GETs either, under Get it does.
func TestClusterPodObjectsFollowTheStrategy(t *testing.T) {
	for _, strategy := range []kubeletconfig.ResourceChangeDetectionStrategy{"", kubeletconfig.GetChangeDetectionStrategy} {
		name := map[kubeletconfig.ResourceChangeDetectionStrategy]string{"": "default"}[strategy] + string(strategy)
		t.Run(name, func(t *testing.T) {
			h := newHarness(t)
			h.cfg.Kubelet.ConfigMapAndSecretChangeDetectionStrategy = strategy
			grace := int64(1)
			ref := func(name string) v1.LocalObjectReference { return v1.LocalObjectReference{Name: name} }
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "env-pod", Namespace: "default", UID: "env-uid"},
				Spec: v1.PodSpec{NodeName: "node1", TerminationGracePeriodSeconds: &grace,
					Containers: []v1.Container{{Name: "c", Image: "busybox:1", ImagePullPolicy: v1.PullIfNotPresent,
						Env: []v1.EnvVar{
							{Name: "PASSWORD", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: ref("creds"), Key: "password"}}},
							{Name: "MODE", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: ref("settings"), Key: "mode"}}},
						}}}}}
			client := fake.NewSimpleClientset(pod,
				&v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: "default"}, Data: map[string][]byte{"password": []byte("s3cret")}},
				&v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "default"}, Data: map[string]string{"mode": "fast"}})
			h.start(Deps{KubeClient: kubefake.Wrap(client)})
			h.eventually("running", func() bool { return len(h.running()) == 1 })
			env := map[string]string{}
			for _, kv := range h.cri.ContainerConfig(h.running()[0].Id).GetEnvs() {
				env[kv.Key] = string(kv.Value)
			}
			if env["PASSWORD"] != "s3cret" || env["MODE"] != "fast" {
				t.Fatalf("env %v", env)
			}
			count := func(verb string) int {
				n := 0
				for _, a := range client.Actions() {
					if r := a.GetResource().Resource; a.GetVerb() == verb && (r == "secrets" || r == "configmaps") {
						n++
					}
				}
				return n
			}
			gets, watches := count("get"), count("watch")
			if strategy == "" && (gets != 0 || watches != 2) {
				t.Errorf("Watch: %d GETs and %d watches of the pod's objects, want 0 and 2", gets, watches)
			}
			if strategy == kubeletconfig.GetChangeDetectionStrategy && (gets < 2 || watches != 0) {
				t.Errorf("Get: %d GETs and %d watches of the pod's objects, want at least 2 and 0", gets, watches)
			}
		})
	}
}
