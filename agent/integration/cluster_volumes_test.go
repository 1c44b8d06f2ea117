//go:build cluster

package integration

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestClusterVolumesAndReadiness: a pod with a config map, a secret and the projected service
// account token (kube-api-access, injected by the apiserver) behind a readiness probe becomes
// Ready, and its Service's EndpointSlice lists it as ready; the secret and token reach the files.
func TestClusterVolumesAndReadiness(t *testing.T) {
	e := newEnv(t, onNodelet)
	cpDir := filepath.Join(t.TempDir(), "cp")
	os.MkdirAll(cpDir, 0o755)
	admin := startControlPlane(t, cpDir)
	client := kubeClient(t, admin)
	ctx := context.Background()
	e.cfg.Kubeconfig = admin
	// The host's own address (not loopback, which endpoints refuse) is the hostNetwork pod's IP.
	e.cfg.NodeIPs = []string{hostIP(t)}
	e.startAgent()
	port := freeLoopbackPort(t)

	for _, obj := range []func() error{
		func() error {
			_, err := client.CoreV1().ConfigMaps("default").Create(ctx, &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "site"},
				Data: map[string]string{"index.html": "hello from the cluster"}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := client.CoreV1().Secrets("default").Create(ctx, &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
				Data: map[string][]byte{"token": []byte("s3cret")}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := client.CoreV1().Services("default").Create(ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "shop"},
				Spec: v1.ServiceSpec{Selector: map[string]string{"app": "shop"}, Ports: []v1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(int32(port))}}}},
				metav1.CreateOptions{})
			return err
		},
	} {
		if err := obj(); err != nil {
			t.Fatal(err)
		}
	}
	grace := int64(2)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "shop", Namespace: "default", Labels: map[string]string{"app": "shop"}},
		Spec: v1.PodSpec{NodeName: "e2e", HostNetwork: true, TerminationGracePeriodSeconds: &grace,
			Volumes: []v1.Volume{
				{Name: "site", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "site"}}}},
				{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "creds"}}},
			},
			Containers: []v1.Container{{Name: "web", Image: e.reg + "/busybox:1",
				Command:        []string{"httpd", "-f", "-p", strconv.Itoa(port), "-h", "/site"},
				Ports:          []v1.ContainerPort{{Name: "http", ContainerPort: int32(port)}},
				ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/index.html", Port: intstr.FromString("http")}}, PeriodSeconds: 1},
				VolumeMounts:   []v1.VolumeMount{{Name: "site", MountPath: "/site"}, {Name: "creds", MountPath: "/creds"}},
			}}}}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.eventually("pod Ready in the apiserver", func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "shop", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
				return true
			}
		}
		return false
	})
	e.eventually("EndpointSlice lists the pod as ready", func() bool {
		sl, err := client.DiscoveryV1().EndpointSlices("default").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=shop"})
		if err != nil {
			return false
		}
		for _, s := range sl.Items {
			for _, ep := range s.Endpoints {
				if slices.Contains(ep.Addresses, e.cfg.NodeIPs[0]) && ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					return true
				}
			}
		}
		return false
	})
	var web string
	for _, c := range running(e.containers("shop")) {
		web = c.Id
	}
	if web == "" {
		// Pods from the apiserver carry their own name, without the static pods' node suffix.
		resp, _ := e.rt.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			LabelSelector: map[string]string{"io.kubernetes.pod.name": "shop"}}})
		for _, c := range resp.GetContainers() {
			web = c.Id
		}
	}
	for cmd, want := range map[string]string{
		"cat /creds/token": "s3cret",
		"test -s /var/run/secrets/kubernetes.io/serviceaccount/token && cat /var/run/secrets/kubernetes.io/serviceaccount/namespace": "default",
		"test -s /var/run/secrets/kubernetes.io/serviceaccount/ca.crt && echo ca":                                                    "ca",
	} {
		resp, err := e.rt.Runtime.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: web, Cmd: []string{"sh", "-c", cmd}, Timeout: 30})
		if err != nil || resp.ExitCode != 0 || !strings.HasPrefix(string(resp.Stdout), want) {
			t.Errorf("%s: %q %v %v", cmd, resp.GetStdout(), resp.GetExitCode(), err)
		}
	}
}

func hostIP(t testing.TB) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() && !n.IP.IsLinkLocalUnicast() {
			return n.IP.String()
		}
	}
	t.Fatal("no non-loopback IPv4 address on this host")
	return ""
}
