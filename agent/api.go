package agent

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/agent/agentconfig"

	"github.com/nodelet/nodelet/agent/auth"
	"github.com/nodelet/nodelet/agent/kubecontainer"
	"github.com/nodelet/nodelet/agent/nodestatus"
	"github.com/nodelet/nodelet/agent/server"
	"github.com/nodelet/nodelet/agent/stats"
)

// nodeLogDir is what /logs/ serves, as the kubelet's system log handler does.
const nodeLogDir = "/var/log"

// api is the agent's HTTP API (pods, logs, exec, stats, metrics) where the configuration asks for
// it: the root-only unix socket, and HTTPS for the apiserver and people.
type api struct {
	srv   *server.Server
	serve server.ServeConfig
	// certs, with serverTLSBootstrap, requests and renews the serving certificate.
	certs *auth.CertManager
	// publish, in a cluster, puts the HTTPS port into the Node's status.
	publish func(ctx context.Context)
}

// newAPI builds the API the configuration asks for, or nil when it asks for none. It serves a's
// pods, events and node, and summary's figures.
func newAPI(a *Agent, client KubeClient, summary *stats.Provider) (*api, error) {
	cfg := a.cfg
	p := &api{serve: server.ServeConfig{Socket: cfg.APISocket}}
	if err := p.addTCP(cfg, client, a.log); err != nil {
		return nil, err
	}
	if p.serve.Socket == "" && p.serve.TCPAddress == "" {
		return nil, nil
	}
	// /configz: the running configuration in the kubelet's format; it never changes while running.
	kc := cfg.KubeletConfiguration()
	d := server.Deps{
		NodeName: cfg.NodeName, Pods: a, Events: a, Node: a, Runtime: a.runtime,
		SyncLoopHealthy: a.Healthz, Summary: summary.Summary, Config: func() any { return kc },
	}
	if *cfg.Kubelet.EnableSystemLogHandler {
		d.NodeLogDir = nodeLogDir
	}
	p.srv = server.New(d)
	return p, nil
}

// addTCP adds the HTTPS listener the configuration asks for: in a cluster unless the port is 0,
// standalone only when a port was given. Authentication and authorization come from it through
// auth.FromConfig, with the apiserver's TokenReview and SubjectAccessReview in a cluster.
func (p *api) addTCP(cfg agentconfig.Config, client KubeClient, log *slog.Logger) error {
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
	p.serve.TCPAddress = net.JoinHostPort(cfg.Kubelet.Address, strconv.Itoa(int(cfg.Kubelet.Port)))
	p.serve.TLS = server.TLSOptions{CertFile: cfg.Kubelet.TLSCertFile, KeyFile: cfg.Kubelet.TLSPrivateKeyFile,
		CertDir: filepath.Join(cfg.RootDir, "pki"), Hosts: hosts}
	if cfg.Kubelet.ServerTLSBootstrap && cfg.Kubelet.TLSCertFile == "" {
		if client == nil {
			return errors.New("serverTLSBootstrap (--rotate-server-certificates) needs a cluster (--kubeconfig)")
		}
		m, err := auth.ServingCertManager(client.CertificateSigningRequests(),
			cfg.NodeName, append([]string{cfg.NodeName}, cfg.NodeIPs...), p.serve.TLS.CertDir)
		if err != nil {
			return err
		}
		p.certs = m
		// Until the cluster signs the request, handshakes fail: there is nothing to serve with yet.
		p.serve.TLS.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := m.Current(); c != nil {
				return c, nil
			}
			return nil, errors.New("no serving certificate yet: its CertificateSigningRequest awaits approval")
		}
	}
	p.serve.Filter = filter
	if client != nil && *cfg.Kubelet.RegisterNode {
		port := cfg.Kubelet.Port
		p.publish = func(ctx context.Context) {
			if err := nodestatus.PublishDaemonEndpoint(ctx, client, cfg.NodeName, port, log); err != nil && ctx.Err() == nil {
				log.Error("the Node's status does not name the agent's port", "err", err)
			}
		}
	}
	if cfg.Kubelet.Authentication.X509.ClientCAFile == "" && client != nil {
		// The apiserver authenticates to nodes by client certificate; with only tokens it gets 401.
		log.Warn("no client CA (--client-ca-file, authentication.x509.clientCAFile): the apiserver's kubectl logs, exec and port-forward will be refused")
	}
	log.Info("agent API", "https", p.serve.TCPAddress, "authorization", string(cfg.Kubelet.Authorization.Mode),
		"anonymous", cfg.Kubelet.Authentication.Anonymous.Enabled != nil && *cfg.Kubelet.Authentication.Anonymous.Enabled,
		"serverTLSBootstrap", p.certs != nil)
	return nil
}

// run serves until ctx ends or a listener fails.
func (p *api) run(ctx context.Context) error {
	if p.certs != nil {
		p.certs.Start()
		defer p.certs.Stop()
	}
	if p.publish != nil {
		go p.publish(ctx)
	}
	return p.srv.Serve(ctx, p.serve)
}

// Node is the agent's Node as it keeps it (built standalone, posted in a cluster), for the API.
func (a *Agent) Node() (*v1.Node, bool) {
	if a.nodes == nil {
		return nil, false
	}
	return a.nodes.Node()
}

// NodeEvents are the events recorded about the node, for `nodelet describe node`.
func (a *Agent) NodeEvents() []v1.Event { return a.events.NodeEvents() }

// Pods returns the desired pods with their current statuses, for the agent's API and `nodelet get pods`.
func (a *Agent) Pods() []*v1.Pod {
	var out []*v1.Pod
	for _, p := range a.pods.GetPods() {
		p = p.DeepCopy()
		if s, ok := a.statuses.GetPodStatus(p.UID); ok {
			p.Status = s
		}
		out = append(out, p)
	}
	return out
}

// NodeName is the name the agent runs as.
func (a *Agent) NodeName() string { return a.cfg.NodeName }

// Pod returns one desired pod with its status (the agent's API reads it).
func (a *Agent) Pod(namespace, name string) (*v1.Pod, bool) {
	p, ok := a.pods.GetPodByFullName(kubecontainer.BuildPodFullName(name, namespace))
	if !ok {
		return nil, false
	}
	p = p.DeepCopy()
	if s, ok := a.statuses.GetPodStatus(p.UID); ok {
		p.Status = s
	}
	return p, true
}

// PodEvents returns the events recorded about a pod, for `nodelet describe`.
func (a *Agent) PodEvents(namespace, name string) []v1.Event {
	return a.events.PodEvents(namespace, name)
}

// Runtime is the CRI client the agent uses; the agent's API proxies exec/attach/logs through it.
func (a *Agent) Runtime() runtimeapi.RuntimeServiceClient { return a.runtime }
