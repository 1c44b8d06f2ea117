package server

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodList(t *testing.T) {
	pods := PodList(func() []*v1.Pod {
		return []*v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "x"}}, {ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "y"}}}
	})
	if p, ok := pods.Pod("y", "a"); !ok || p.Namespace != "y" {
		t.Fatal("Pod by namespace and name")
	}
	if _, ok := pods.Pod("z", "a"); ok {
		t.Fatal("found a pod in the wrong namespace")
	}
}
