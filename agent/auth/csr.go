package auth

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"

	certificates "k8s.io/api/certificates/v1"
	"k8s.io/client-go/util/certificate"
)

// ServingCertManager gets the API's serving certificate from the cluster, as the kubelet's
// serverTLSBootstrap does: a CertificateSigningRequest to the kubernetes.io/kubelet-serving signer
// for system:node:<node> with the node's names and addresses, kept in certDir as
// kubelet-server-current.pem and renewed before it expires. Call Start on it, and serve with
// TLSOptions.GetCertificate set to a func returning its Current(). The CSR must be approved by the
// cluster (kubelet-serving CSRs are not auto-approved upstream).
func ServingCertManager(clientFn certificate.ClientsetFunc, node string, hosts []string, certDir string) (certificate.Manager, error) {
	store, err := certificate.NewFileStore("kubelet-server", certDir, certDir, "", "")
	if err != nil {
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
	return certificate.NewManager(&certificate.Config{
		ClientsetFn:      clientFn,
		Template:         tmpl,
		SignerName:       certificates.KubeletServingSignerName,
		Usages:           []certificates.KeyUsage{certificates.UsageDigitalSignature, certificates.UsageServerAuth},
		CertificateStore: store,
		Name:             "kubelet-serving",
	})
}
