package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"path/filepath"
	"sync"
	"testing"
	"time"

	certificates "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// signer is a cluster that approves (or denies) every CSR and signs it with its own CA.
type signer struct {
	mu     sync.Mutex
	csrs   map[string]*certificates.CertificateSigningRequest
	deny   bool
	caKey  *ecdsa.PrivateKey
	caCert *x509.Certificate
}

func newSigner(t *testing.T) *signer {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ca"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return &signer{csrs: map[string]*certificates.CertificateSigningRequest{}, caKey: key, caCert: ca}
}

func (s *signer) Create(_ context.Context, csr *certificates.CertificateSigningRequest, _ metav1.CreateOptions) (*certificates.CertificateSigningRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := csr.DeepCopy()
	c.Name = csr.GenerateName + string(rune('a'+len(s.csrs)))
	s.csrs[c.Name] = c
	return c, nil
}

func (s *signer) Get(_ context.Context, name string, _ metav1.GetOptions) (*certificates.CertificateSigningRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.csrs[name]
	if !ok {
		return nil, apierrors.NewNotFound(certificates.Resource("certificatesigningrequests"), name)
	}
	if s.deny {
		c.Status.Conditions = []certificates.CertificateSigningRequestCondition{{Type: certificates.CertificateDenied, Status: v1.ConditionTrue, Reason: "No"}}
		return c.DeepCopy(), nil
	}
	if len(c.Status.Certificate) == 0 {
		block, _ := pem.Decode(c.Spec.Request)
		req, err := x509.ParseCertificateRequest(block.Bytes)
		if err != nil {
			return nil, err
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: req.Subject, DNSNames: req.DNSNames, IPAddresses: req.IPAddresses,
			NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, s.caCert, req.PublicKey, s.caKey)
		if err != nil {
			return nil, err
		}
		c.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	}
	return c.DeepCopy(), nil
}

func TestServingCertIsRequestedStoredAndReused(t *testing.T) {
	s := newSigner(t)
	dir := t.TempDir()
	m, err := ServingCertManager(s, "node1", []string{"node1", "10.0.0.1"}, dir)
	if err != nil {
		t.Fatal(err)
	}
	m.poll = 10 * time.Millisecond
	m.Start()
	deadline := time.Now().Add(10 * time.Second)
	for m.Current() == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	m.Stop()
	c := m.Current()
	if c == nil {
		t.Fatal("no certificate after the CSR was signed")
	}
	if c.Leaf.Subject.CommonName != "system:node:node1" || len(c.Leaf.IPAddresses) != 1 || c.Leaf.DNSNames[0] != "node1" {
		t.Fatalf("certificate for %v %v %v", c.Leaf.Subject, c.Leaf.DNSNames, c.Leaf.IPAddresses)
	}
	for _, csr := range s.csrs {
		if csr.Spec.SignerName != certificates.KubeletServingSignerName || len(csr.Spec.Usages) != 2 {
			t.Errorf("CSR %+v", csr.Spec)
		}
	}
	// A restarted agent serves with the stored pair at once.
	again, err := ServingCertManager(nil, "node1", nil, dir)
	if err != nil || again.Current() == nil || !again.Current().Leaf.Equal(c.Leaf) {
		t.Fatalf("stored pair not reused from %s: %v", filepath.Join(dir, "kubelet-server-current.pem"), err)
	}
}

func TestADeniedRequestGivesNoCertificate(t *testing.T) {
	s := newSigner(t)
	s.deny = true
	m, err := ServingCertManager(s, "node1", nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.renew(context.Background()); err == nil || m.Current() != nil {
		t.Fatalf("denied CSR: err %v, certificate %v", err, m.Current())
	}
}
