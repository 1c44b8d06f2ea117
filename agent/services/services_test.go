package services

import (
	"context"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/harness/kubefake"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestListerSyncsAndFollowsChanges(t *testing.T) {
	client := fake.NewClientset(&v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"},
		Spec: v1.ServiceSpec{ClusterIP: "10.96.0.1", Ports: []v1.ServicePort{{Name: "https", Port: 443}}}})
	l := New(kubefake.Wrap(client))
	if l.HasSynced() {
		t.Fatal("synced before Run")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor(t, l.HasSynced)
	got, err := l.List()
	if err != nil || len(got) != 1 || got[0].Name != "kubernetes" {
		t.Fatalf("List = %v, %v", got, err)
	}
	_, err = client.CoreV1().Services("ns").Create(ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: v1.ServiceSpec{ClusterIP: "10.96.0.9", Ports: []v1.ServicePort{{Port: 80}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { s, _ := l.List(); return len(s) == 2 })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("timed out")
		}
	}
}
