package kuberuntime

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/harness/kubefake"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodelet/nodelet/agent/services"
)

func svc(ns, name, ip string, ports ...v1.ServicePort) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: v1.ServiceSpec{ClusterIP: ip, Ports: ports}}
}

// syncedServices is a services.Lister over a fake clientset holding objs, after its first list.
func syncedServices(t *testing.T, objs ...*v1.Service) *services.Lister {
	t.Helper()
	client := fake.NewClientset()
	for _, s := range objs {
		if _, err := client.CoreV1().Services(s.Namespace).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	l := services.New(kubefake.Wrap(client))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	for end := time.Now().Add(10 * time.Second); !l.HasSynced(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("services never synced")
		}
	}
	return l
}

func envMap(t *testing.T, m *Manager, pod *v1.Pod) map[string]string {
	t.Helper()
	envs, _, err := m.makeEnv(context.Background(), pod, &pod.Spec.Containers[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range envs {
		got[kv.Key] = string(kv.Value)
	}
	return got
}

func TestServiceEnvVars(t *testing.T) {
	lister := syncedServices(t,
		svc("default", "kubernetes", "10.96.0.1", v1.ServicePort{Name: "https", Port: 443, Protocol: v1.ProtocolTCP}),
		svc("default", "other", "10.96.0.7", v1.ServicePort{Port: 1}),
		svc("shop", "cart-db", "10.96.3.4",
			v1.ServicePort{Name: "sql", Port: 5432},
			v1.ServicePort{Name: "metrics-udp", Port: 9100, Protocol: v1.ProtocolUDP}),
		svc("shop", "headless", v1.ClusterIPNone, v1.ServicePort{Port: 80}),
		svc("shop", "unset", "", v1.ServicePort{Port: 80}),
		svc("elsewhere", "web", "10.96.9.9", v1.ServicePort{Port: 80}),
		svc("v6", "api", "fd00::10", v1.ServicePort{Port: 8080}),
	)
	m := NewManager(Deps{Services: lister})
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	pod.Namespace = "shop"

	want := map[string]string{
		"KUBERNETES_SERVICE_HOST":       "10.96.0.1",
		"KUBERNETES_SERVICE_PORT":       "443",
		"KUBERNETES_SERVICE_PORT_HTTPS": "443",
		"KUBERNETES_PORT":               "tcp://10.96.0.1:443",
		"KUBERNETES_PORT_443_TCP":       "tcp://10.96.0.1:443",
		"KUBERNETES_PORT_443_TCP_PROTO": "tcp",
		"KUBERNETES_PORT_443_TCP_PORT":  "443",
		"KUBERNETES_PORT_443_TCP_ADDR":  "10.96.0.1",
	}
	cartDB := map[string]string{
		"CART_DB_SERVICE_HOST":             "10.96.3.4",
		"CART_DB_SERVICE_PORT":             "5432",
		"CART_DB_SERVICE_PORT_SQL":         "5432",
		"CART_DB_SERVICE_PORT_METRICS_UDP": "9100",
		"CART_DB_PORT":                     "tcp://10.96.3.4:5432",
		"CART_DB_PORT_5432_TCP":            "tcp://10.96.3.4:5432",
		"CART_DB_PORT_5432_TCP_PROTO":      "tcp",
		"CART_DB_PORT_5432_TCP_PORT":       "5432",
		"CART_DB_PORT_5432_TCP_ADDR":       "10.96.3.4",
		"CART_DB_PORT_9100_UDP":            "udp://10.96.3.4:9100",
		"CART_DB_PORT_9100_UDP_PROTO":      "udp",
		"CART_DB_PORT_9100_UDP_PORT":       "9100",
		"CART_DB_PORT_9100_UDP_ADDR":       "10.96.3.4",
	}
	all := maps.Clone(want)
	maps.Copy(all, cartDB)
	if got := envMap(t, m, pod); !maps.Equal(got, all) {
		t.Errorf("namespace shop:\n got %v\nwant %v", got, all)
	}

	// enableServiceLinks false: the apiserver's Service only.
	off := false
	pod.Spec.EnableServiceLinks = &off
	if got := envMap(t, m, pod); !maps.Equal(got, want) {
		t.Errorf("enableServiceLinks false:\n got %v\nwant %v", got, want)
	}

	// IPv6 cluster IPs are bracketed in the URLs.
	pod.Namespace, pod.Spec.EnableServiceLinks = "v6", nil
	if got := envMap(t, m, pod); got["API_PORT"] != "tcp://[fd00::10]:8080" || got["API_PORT_8080_TCP_ADDR"] != "fd00::10" {
		t.Errorf("IPv6 service: %v", got)
	}

	// The container's own variables win, and $(VAR) may name a Service's.
	pod.Namespace = "shop"
	c := &pod.Spec.Containers[0]
	c.Env = []v1.EnvVar{{Name: "CART_DB_SERVICE_HOST", Value: "db.local"}, {Name: "API", Value: "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"}}
	envs, vals, err := m.makeEnv(context.Background(), pod, c, nil)
	if err != nil {
		t.Fatal(err)
	}
	if vals["CART_DB_SERVICE_HOST"] != "db.local" || vals["API"] != "https://10.96.0.1:443" {
		t.Errorf("override/expansion: %v", vals)
	}
	// Service variables come first, the container's last, so a runtime applying them in order agrees.
	if last := envs[len(envs)-1]; last.Key != "API" {
		t.Errorf("last variable %s, want the container's API", last.Key)
	}
	seen := 0
	for _, kv := range envs {
		if kv.Key == "CART_DB_SERVICE_HOST" {
			seen++
		}
	}
	if seen != 1 {
		t.Errorf("CART_DB_SERVICE_HOST sent %d times", seen)
	}
}

// A Service named kubernetes in the pod's namespace takes the variables' name, as with the kubelet.
func TestServiceEnvOwnNamespaceKubernetesWins(t *testing.T) {
	m := NewManager(Deps{Services: syncedServices(t,
		svc("default", "kubernetes", "10.96.0.1", v1.ServicePort{Port: 443}),
		svc("shop", "kubernetes", "10.96.5.5", v1.ServicePort{Port: 80}))})
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	pod.Namespace = "shop"
	if got := envMap(t, m, pod)["KUBERNETES_SERVICE_HOST"]; got != "10.96.5.5" {
		t.Errorf("KUBERNETES_SERVICE_HOST=%q", got)
	}
	off := false
	pod.Spec.EnableServiceLinks = &off
	if got := envMap(t, m, pod)["KUBERNETES_SERVICE_HOST"]; got != "10.96.0.1" {
		t.Errorf("without service links KUBERNETES_SERVICE_HOST=%q", got)
	}
}

// Until the informer has listed once, an API pod's containers are not created (the sync retries);
// a static pod's are, since it may be the apiserver itself.
func TestServiceEnvWaitsForTheFirstList(t *testing.T) {
	m := NewManager(Deps{Services: services.New(kubefake.New())}) // never Run
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	if _, _, err := m.makeEnv(context.Background(), pod, &pod.Spec.Containers[0], nil); !errors.Is(err, errServicesNotSynced) {
		t.Fatalf("unsynced: %v, want errServicesNotSynced", err)
	}
	pod.Annotations = map[string]string{"kubernetes.io/config.source": "file"}
	if _, _, err := m.makeEnv(context.Background(), pod, &pod.Spec.Containers[0], nil); err != nil {
		t.Fatalf("static pod: %v", err)
	}
}

// Standalone (no Services dependency) there are no service variables, as with a kubelet without
// an apiserver.
func TestNoServiceEnvStandalone(t *testing.T) {
	m := NewManager(Deps{})
	pod := testPod(v1.RestartPolicyAlways, nil, "a")
	if got := envMap(t, m, pod); len(got) != 0 {
		t.Errorf("env %v", got)
	}
}
