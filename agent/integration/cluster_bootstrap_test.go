//go:build cluster

package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestClusterServingCertBootstrap: with --rotate-server-certificates the agent asks the cluster
// for its serving certificate (a kubelet-serving CSR), serves with it once an administrator
// approves it and the controller-manager signs it, and the apiserver, which verifies nodes'
// certificates against the cluster CA, then reaches it for kubectl logs.
func TestClusterServingCertBootstrap(t *testing.T) {
	e := newEnv(t, onNodelet)
	cpDir := filepath.Join(t.TempDir(), "cp")
	os.MkdirAll(cpDir, 0o755)
	admin, _ := startControlPlanePKI(t, cpDir)
	client := kubeClient(t, admin)
	ctx := context.Background()
	bindKubeletAPIAdmin(t, client)
	nodeIP := addLoopbackIP(t)
	port := freePort(t)
	e.writePod("static", "Always", e.reg+"/busybox:1", "echo hello-from-static; "+loop)
	e.startAgentProcess(nodeIP, port, "--kubeconfig", admin, "--node-ip", nodeIP, "--address", nodeIP,
		"--port", strconv.Itoa(port), "--rotate-server-certificates", "--client-ca-file", filepath.Join(cpDir, "ca.crt"))

	var csr certificatesv1.CertificateSigningRequest
	e.eventually("the agent's kubelet-serving CSR", func() bool {
		l, err := client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		for _, c := range l.Items {
			if c.Spec.SignerName == certificatesv1.KubeletServingSignerName {
				csr = c
				return true
			}
		}
		return false
	})
	csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
		Type: certificatesv1.CertificateApproved, Status: v1.ConditionTrue, Reason: "TestApproved", Message: "approved by the test"})
	if _, err := client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, &csr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	ca, err := os.ReadFile(filepath.Join(cpDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	e.eventually("the API serving the cluster-signed certificate", func() bool {
		c, err := tls.Dial("tcp", net.JoinHostPort(nodeIP, strconv.Itoa(port)), &tls.Config{RootCAs: roots, ServerName: nodeIP})
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	e.eventually("static pod mirrored and running", func() bool {
		p, err := client.CoreV1().Pods("default").Get(ctx, "static-e2e", metav1.GetOptions{})
		return err == nil && p.Status.Phase == v1.PodRunning
	})
	var out []byte
	e.eventually("kubectl logs through the verified connection", func() bool {
		out, _ = exec.Command(filepath.Join(kubeBinDir(), "kubectl"), "--kubeconfig", admin, "logs", "static-e2e").CombinedOutput()
		return strings.Contains(string(out), "hello-from-static")
	})
}
