package app

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

func TestAgentCmdFlags(t *testing.T) {
	cmd := newAgentCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"--container-runtime-endpoint", "--pod-manifest-path", "--manifest-url", "--kubeconfig",
		"--hostname-override", "--node-ip", "--root-dir", "--max-pods", "--config"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("nodelet agent has no %s flag", f)
		}
	}
}

func TestAgentCmdRejectsBadConfig(t *testing.T) {
	cmd := newAgentCmd()
	cmd.SetArgs([]string{"--node-ip=not-an-ip"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "not an IP") {
		t.Fatalf("err %v", err)
	}
}

// The standalone agent serves HTTPS only when given a port, with its self-signed certificate, and
// lets in client certificates of its client CA only.
func TestAgentServesHTTPSWithClientCerts(t *testing.T) {
	dir := t.TempDir()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	caDER, _ := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	caCert, _ := x509.ParseCertificate(caDER)
	os.WriteFile(filepath.Join(dir, "ca.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.CreateCertificate(rand.Reader, &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "admin"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, caCert, &key.PublicKey, caKey)
	clientCert := tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}

	port := testutil.FreePort(t)
	root := filepath.Join(dir, "root")
	cmd := newAgentCmd()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"--container-runtime-endpoint", "unix://" + filepath.Join(dir, "no-runtime.sock"),
		"--root-dir", root, "--pod-logs-dir", filepath.Join(dir, "logs"), "--hostname-override", "n1", "--node-ip", "127.0.0.1",
		"--healthz-port", "0", "--cgroup-root", "", "--api-socket", "",
		"--address", "127.0.0.1", "--port", strconv.Itoa(port), "--client-ca-file", filepath.Join(dir, "ca.crt"),
		"--authentication-token-webhook=false", "--authorization-mode", "AlwaysAllow"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
			c.Close()
			t.Error("the API still listens after the agent stopped")
		}
	}()

	get := func(cfg *tls.Config, path string) (int, error) {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
		resp, err := c.Get("https://127.0.0.1:" + strconv.Itoa(port) + path)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := get(&tls.Config{InsecureSkipVerify: true}, "/healthz"); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the HTTPS API never answered: %v", err)
		}
	}
	// The self-signed serving certificate is kept under the root dir and names 127.0.0.1.
	servingPEM, err := os.ReadFile(filepath.Join(root, "pki", "kubelet.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(servingPEM)
	for _, tc := range []struct {
		name string
		cert bool
		path string
		want int
	}{
		{"anonymous logs", false, "/containerLogs/default/web-n1/c", http.StatusUnauthorized},
		{"anonymous exec", false, "/exec/default/web-n1/c?command=sh", http.StatusUnauthorized},
		{"anonymous pods", false, "/pods", http.StatusUnauthorized},
		{"client certificate", true, "/pods", http.StatusOK},
	} {
		cfg := &tls.Config{RootCAs: roots}
		if tc.cert {
			cfg.Certificates = []tls.Certificate{clientCert}
		}
		code, err := get(cfg, tc.path)
		if err != nil || code != tc.want {
			t.Errorf("%s: status %d err %v, want %d", tc.name, code, err, tc.want)
		}
	}
}
