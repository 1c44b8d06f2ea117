package streaming

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// selfSigned makes a certificate for 127.0.0.1 and returns it with its PEM, for the client to trust.
func selfSigned(t *testing.T) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "nodelet streaming test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:         true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestTLSAndAddress(t *testing.T) {
	cert, caPEM := selfSigned(t)
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s, err := New(Config{Addr: addr, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}}}, &fakeRuntime{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Addr().String() != addr {
		t.Fatalf("listening on %s, asked for %s", s.Addr(), addr)
	}
	resp, err := s.GetExec(&runtimeapi.ExecRequest{ContainerId: "c", Cmd: []string{"echo"}, Stdout: true})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(resp.Url)
	if u.Scheme != "https" || u.Host != addr {
		t.Fatalf("URL %s", resp.Url)
	}
	ex, err := remotecommand.NewSPDYExecutor(&rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}}, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := ex.StreamWithContext(t.Context(), remotecommand.StreamOptions{Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "id=c cmd=echo tty=false stdin=\"\"\n" {
		t.Fatalf("stdout %q", out.String())
	}
	// A client that does not trust the certificate gets nothing.
	resp, _ = s.GetExec(&runtimeapi.ExecRequest{ContainerId: "c", Cmd: []string{"echo"}, Stdout: true})
	u, _ = url.Parse(resp.Url)
	ex, _ = remotecommand.NewSPDYExecutor(&rest.Config{}, "POST", u)
	if err := ex.StreamWithContext(t.Context(), remotecommand.StreamOptions{Stdout: &out}); err == nil {
		t.Fatal("an untrusting client streamed")
	}
}
