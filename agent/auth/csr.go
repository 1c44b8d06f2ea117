package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	certificates "k8s.io/api/certificates/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/internal/atomicfile"
)

// CSRClient is the apiserver's CertificateSigningRequests as the serving certificate needs them
// (kubeclient's and client-go's typed clients are both one).
type CSRClient interface {
	Create(ctx context.Context, csr *certificates.CertificateSigningRequest, opts metav1.CreateOptions) (*certificates.CertificateSigningRequest, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*certificates.CertificateSigningRequest, error)
}

// CertManager keeps the API's serving certificate signed by the cluster.
type CertManager struct {
	client CSRClient
	tmpl   *x509.CertificateRequest
	dir    string
	log    *slog.Logger
	poll   time.Duration

	// OnRenewError and OnRotate, when set, hear of each failed renewal and of each certificate
	// replaced, with how long it lived (the kubelet's certificate metrics).
	OnRenewError func()
	OnRotate     func(lived time.Duration)

	mu   sync.Mutex
	cur  *tls.Certificate
	stop context.CancelFunc
	done chan struct{}
}

// The kubelet's file names for its bootstrapped serving pair (client-go's file store), so a
// certificate a kubelet left behind is used, and the other way round.
const (
	servingPairPrefix = "kubelet-server"
	currentSuffix     = "-current.pem"
)

// ServingCertManager gets the API's serving certificate from the cluster, as the kubelet's
// serverTLSBootstrap does: a CertificateSigningRequest to the kubernetes.io/kubelet-serving signer
// for system:node:<node> with the node's names and addresses, kept in certDir as
// kubelet-server-current.pem and renewed at 70–90 % of its lifetime. Call Start on it, and serve
// with TLSOptions.GetCertificate set to a func returning its Current(). The CSR must be approved
// by the cluster (kubelet-serving CSRs are not auto-approved upstream).
func ServingCertManager(client CSRClient, node string, hosts []string, certDir string) (*CertManager, error) {
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return nil, fmt.Errorf("serving certificate store: %w", err)
	}
	tmpl := &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + node, Organization: []string{"system:nodes"}}}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	m := &CertManager{client: client, tmpl: tmpl, dir: certDir, log: slog.Default(), poll: 2 * time.Second}
	if c, err := tls.LoadX509KeyPair(m.currentPath(), m.currentPath()); err == nil && c.Leaf != nil && time.Now().Before(c.Leaf.NotAfter) {
		m.cur = &c
	}
	return m, nil
}

func (m *CertManager) currentPath() string {
	return filepath.Join(m.dir, servingPairPrefix+currentSuffix)
}

// Current is the certificate to serve with; nil until the cluster has signed one.
func (m *CertManager) Current() *tls.Certificate {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

// Start requests and renews the certificate in the background until Stop.
func (m *CertManager) Start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stop != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	m.stop, m.done = cancel, make(chan struct{})
	go func() {
		defer close(m.done)
		m.run(ctx)
	}()
}

// Stop ends Start's work and waits for it.
func (m *CertManager) Stop() {
	m.mu.Lock()
	stop, done := m.stop, m.done
	m.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

func (m *CertManager) run(ctx context.Context) {
	backoff := time.Second
	for {
		wait := time.Duration(0)
		if c := m.Current(); c != nil {
			wait = time.Until(rotationDeadline(c.Leaf))
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
		if err := m.renew(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			m.log.Warn("serving certificate not renewed", "err", err, "retry", backoff)
			if m.OnRenewError != nil {
				m.OnRenewError()
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Minute)
			continue
		}
		backoff = time.Second
	}
}

// rotationDeadline is a random point between 70 % and 90 % of the certificate's lifetime, so
// that a fleet's certificates are not all renewed at once, and renewal has time to be approved.
func rotationDeadline(c *x509.Certificate) time.Time {
	life := c.NotAfter.Sub(c.NotBefore)
	return c.NotBefore.Add(time.Duration(float64(life) * (0.7 + 0.2*mathrand.Float64())))
}

// renew asks for a certificate for a new key and waits until the cluster issues it.
func (m *CertManager) renew(ctx context.Context) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, m.tmpl, key)
	if err != nil {
		return err
	}
	csr := &certificates.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-"},
		Spec: certificates.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificates.KubeletServingSignerName,
			Usages:     []certificates.KeyUsage{certificates.UsageDigitalSignature, certificates.UsageServerAuth},
		},
	}
	created, err := m.client.Create(ctx, csr, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create CertificateSigningRequest: %w", err)
	}
	m.log.Info("serving certificate requested", "csr", created.Name)
	certPEM, err := m.awaitIssued(ctx, created.Name)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("certificate of %s: %w", created.Name, err)
	}
	if err := m.store(append(append([]byte{}, certPEM...), keyPEM...)); err != nil {
		return err
	}
	m.mu.Lock()
	prev := m.cur
	m.cur = &pair
	m.mu.Unlock()
	if prev != nil && prev.Leaf != nil && m.OnRotate != nil {
		m.OnRotate(time.Since(prev.Leaf.NotBefore))
	}
	m.log.Info("serving certificate issued", "csr", created.Name, "notAfter", pair.Leaf.NotAfter)
	return nil
}

// awaitIssued polls the CSR until it carries a certificate, or is denied, failed or gone. It
// may wait for long: a kubelet-serving CSR waits for a person or a controller to approve it.
func (m *CertManager) awaitIssued(ctx context.Context, name string) ([]byte, error) {
	for {
		csr, err := m.client.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("CertificateSigningRequest %s was deleted before it was issued", name)
		case err != nil:
			m.log.Debug("read CertificateSigningRequest", "csr", name, "err", err)
		default:
			for _, c := range csr.Status.Conditions {
				if (c.Type == certificates.CertificateDenied || c.Type == certificates.CertificateFailed) && c.Status != v1.ConditionFalse {
					return nil, fmt.Errorf("CertificateSigningRequest %s %s: %s %s", name, c.Type, c.Reason, c.Message)
				}
			}
			if len(csr.Status.Certificate) > 0 {
				return csr.Status.Certificate, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(m.poll):
		}
	}
}

// store writes the pair as kubelet-server-<time>.pem and points kubelet-server-current.pem at
// it, each step atomic, so a crash leaves the old or the new pair current, never half of one.
func (m *CertManager) store(pairPEM []byte) error {
	name := servingPairPrefix + "-" + time.Now().UTC().Format("2006-01-02-15-04-05") + ".pem"
	if err := atomicfile.Write(filepath.Join(m.dir, name), pairPEM, 0o600); err != nil {
		return err
	}
	tmp := m.currentPath() + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(name, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, m.currentPath()); err != nil {
		return errors.Join(err, os.Remove(tmp))
	}
	return nil
}
