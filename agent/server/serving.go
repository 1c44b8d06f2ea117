package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"

	"github.com/nodelet/nodelet/agent/agentconfig"
	"github.com/nodelet/nodelet/agent/auth"
	"github.com/nodelet/nodelet/agent/kubeclient"
	"github.com/nodelet/nodelet/agent/metrics"
	"github.com/nodelet/nodelet/agent/nodestatus"
)

// nodeLogDir is what /logs/ serves, as the kubelet's system log handler does.
const nodeLogDir = "/var/log"

// Client is what serving HTTPS in a cluster asks of the apiserver: token and access reviews for
// the filter, the serving certificate's signing requests, and the Node whose status names the
// port. A *kubeclient.Client is one.
type Client interface {
	TokenReviews() kubeclient.TokenReviewInterface
	SubjectAccessReviews() kubeclient.SubjectAccessReviewInterface
	CertificateSigningRequests() kubeclient.CertificateSigningRequestInterface
	Nodes() kubeclient.NodeInterface
}

// Serving is the API where the agent's configuration asks for it: the root-only unix socket, and
// HTTPS for the apiserver and people, with what HTTPS takes (the authentication and authorization
// filter, the TLS settings, a serving certificate the cluster signs, the port published in the
// Node's status).
type Serving struct {
	srv   *Server
	serve ServeConfig
	// certs, with serverTLSBootstrap, requests and renews the serving certificate.
	certs *auth.CertManager
	// publish, in a cluster, puts the HTTPS port into the Node's status.
	publish func(ctx context.Context)
}

// NewServing builds the API cfg asks for over d, or returns nil when it asks for none. client is
// the apiserver, nil standalone. The node's name, /configz and /logs/ come from cfg.
func NewServing(cfg agentconfig.Config, client Client, d Deps, log *slog.Logger) (*Serving, error) {
	s := &Serving{serve: ServeConfig{Socket: cfg.APISocket}}
	if err := s.addTCP(cfg, client, log); err != nil {
		return nil, err
	}
	if s.serve.Socket == "" && s.serve.TCPAddress == "" {
		return nil, nil
	}
	// /configz: the running configuration in the kubelet's format; it never changes while running.
	kc := cfg.KubeletConfiguration()
	d.NodeName, d.Config = cfg.NodeName, func() any { return kc }
	if *cfg.Kubelet.EnableSystemLogHandler {
		d.NodeLogDir = nodeLogDir
	}
	s.srv = New(d)
	return s, nil
}

// addTCP adds the HTTPS listener the configuration asks for: in a cluster unless the port is 0,
// standalone only when a port was given. Authentication and authorization come from it through
// auth.FromConfig, with the apiserver's TokenReview and SubjectAccessReview in a cluster.
func (s *Serving) addTCP(cfg agentconfig.Config, client Client, log *slog.Logger) error {
	if cfg.Kubelet.Port == 0 || (client == nil && !cfg.PortSet) {
		return nil
	}
	var tokens auth.TokenReviewer
	var sar auth.SubjectAccessReviewer
	if client != nil {
		tokens = client.TokenReviews()
		sar = client.SubjectAccessReviews()
	}
	filter, err := auth.FromConfig(cfg.Kubelet.Authentication, cfg.Kubelet.Authorization, tokens, sar, cfg.NodeName)
	if err != nil {
		return fmt.Errorf("agent API on port %d: %w", cfg.Kubelet.Port, err)
	}
	// The self-signed certificate names every address the apiserver or a person may dial.
	hosts := append([]string{cfg.NodeName, "localhost"}, cfg.NodeIPs...)
	hosts = append(hosts, "127.0.0.1", "::1")
	s.serve.TCPAddress = net.JoinHostPort(cfg.Kubelet.Address, strconv.Itoa(int(cfg.Kubelet.Port)))
	s.serve.TLS = TLSOptions{CertFile: cfg.Kubelet.TLSCertFile, KeyFile: cfg.Kubelet.TLSPrivateKeyFile,
		CertDir: filepath.Join(cfg.RootDir, "pki"), Hosts: hosts}
	if cfg.Kubelet.ServerTLSBootstrap && cfg.Kubelet.TLSCertFile == "" {
		if client == nil {
			return errors.New("serverTLSBootstrap (--rotate-server-certificates) needs a cluster (--kubeconfig)")
		}
		m, err := auth.ServingCertManager(client.CertificateSigningRequests(),
			cfg.NodeName, append([]string{cfg.NodeName}, cfg.NodeIPs...), s.serve.TLS.CertDir)
		if err != nil {
			return err
		}
		s.certs = m
		m.OnRenewError, m.OnRotate = metrics.ServingRenewFailed, metrics.ServingRotated
		metrics.ServingCertificate(m.Current)
		// Until the cluster signs the request, handshakes fail: there is nothing to serve with yet.
		s.serve.TLS.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := m.Current(); c != nil {
				return c, nil
			}
			return nil, errors.New("no serving certificate yet: its CertificateSigningRequest awaits approval")
		}
	}
	s.serve.Filter = filter
	if client != nil && *cfg.Kubelet.RegisterNode {
		port := cfg.Kubelet.Port
		s.publish = func(ctx context.Context) {
			if err := nodestatus.PublishDaemonEndpoint(ctx, client, cfg.NodeName, port, log); err != nil && ctx.Err() == nil {
				log.Error("the Node's status does not name the agent's port", "err", err)
			}
		}
	}
	if cfg.Kubelet.Authentication.X509.ClientCAFile == "" && client != nil {
		// The apiserver authenticates to nodes by client certificate; with only tokens it gets 401.
		log.Warn("no client CA (--client-ca-file, authentication.x509.clientCAFile): the apiserver's kubectl logs, exec and port-forward will be refused")
	}
	log.Info("agent API", "https", s.serve.TCPAddress, "authorization", string(cfg.Kubelet.Authorization.Mode),
		"anonymous", cfg.Kubelet.Authentication.Anonymous.Enabled != nil && *cfg.Kubelet.Authentication.Anonymous.Enabled,
		"serverTLSBootstrap", s.certs != nil)
	return nil
}

// ServeHTTP routes one request as the listeners do, without their authentication.
func (s *Serving) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.srv.ServeHTTP(w, r) }

// Run serves until ctx ends or a listener fails.
func (s *Serving) Run(ctx context.Context) error {
	if s.certs != nil {
		s.certs.Start()
		defer s.certs.Stop()
	}
	if s.publish != nil {
		go s.publish(ctx)
	}
	return s.srv.Serve(ctx, s.serve)
}
