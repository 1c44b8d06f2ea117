package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLinksNoTestHarness keeps fakes, test registries and leak checkers out of the shipped binary:
// they live under test/ and only tests may import them.
func TestLinksNoTestHarness(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/nodelet/nodelet/cmd/nodelet").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/nodelet/nodelet/test/") || strings.Contains(pkg, "/fake") {
			t.Errorf("cmd/nodelet links %s, a test harness", pkg)
		}
	}
}

// TestLinksNoClientset keeps client-go's generated clientset and what comes with it out of the
// binary. Every linked package's init runs in every mode, and the clientset's scheme alone
// registers every API group: it doubled the pages `nodelet runtime` touches at start. The agent
// uses agent/kubeclient, agent/recorder, auth.CertManager and agent/kubeconfig instead.
func TestLinksNoClientset(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/nodelet/nodelet/cmd/nodelet").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	banned := []string{
		"k8s.io/client-go/kubernetes", // the clientset, its typed clients and its scheme
		"k8s.io/client-go/informers",
		"k8s.io/client-go/listers",
		"k8s.io/client-go/applyconfigurations",
		"k8s.io/client-go/gentype",
		"k8s.io/client-go/discovery",
		"k8s.io/client-go/tools/record",     // links strategic merge patch and the OpenAPI models
		"k8s.io/client-go/util/certificate", // needs the clientset
		// clientcmd's kubeconfig scheme (built by an init) and its v1 conversions: agent/kubeconfig
		// reads the file instead. clientcmd itself imports both.
		"k8s.io/client-go/tools/clientcmd/api/latest",
		"k8s.io/client-go/tools/clientcmd/api/v1",
		// component-base's feature gates and legacy metrics registry, which k8s.io/kubelet's
		// KubeletConfiguration links through its logging and tracing types:
		// agent/internal/kubeletconfig mirrors the format instead.
		"k8s.io/component-base",
		"k8s.io/kubelet/config/v1beta1",
		// regexps compiled at init and database/sql, for two constructors that wrap prometheus'
		"github.com/prometheus/client_golang/prometheus/collectors",
		// registers its file descriptor at init; agent/prober encodes the two messages itself
		"google.golang.org/grpc/health/grpc_health_v1",
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, b := range banned {
			if pkg == b || strings.HasPrefix(pkg, b+"/") {
				t.Errorf("cmd/nodelet links %s", pkg)
			}
		}
	}
}
