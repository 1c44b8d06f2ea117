package agentconfig

import (
	"fmt"
	"net"
	"os"
	"reflect"

	kubeletv1beta1 "github.com/nodelet/nodelet/agent/internal/kubeletconfig"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// DefaultPort is the kubelet's: the apiserver reaches the agent's HTTPS API there for logs, exec,
// attach, port-forward and stats.
const DefaultPort = 10250

// Serving is how the agent's HTTPS API listens and whom it lets in, as the KubeletConfiguration
// says it (address, port, tlsCertFile, tlsPrivateKeyFile, authentication, authorization).
type Serving struct {
	Address string
	Port    int
	// PortSet says the port was asked for (flag or file): standalone, the API goes on TCP only then.
	PortSet bool
	// TLSCertFile and TLSPrivateKeyFile are the serving certificate; empty makes a self-signed one
	// under the root dir.
	TLSCertFile, TLSPrivateKeyFile string
	// ServerTLSBootstrap asks the cluster for the serving certificate through a
	// CertificateSigningRequest (kubernetes.io/kubelet-serving) and renews it, instead of the
	// self-signed one.
	ServerTLSBootstrap bool
	Authentication     kubeletv1beta1.KubeletAuthentication
	Authorization      kubeletv1beta1.KubeletAuthorization
}

// DefaultServing has the config file's defaults, not the kubelet's legacy flag defaults: anonymous
// requests refused, tokens checked by TokenReview, every request authorized by SubjectAccessReview.
func DefaultServing() Serving {
	no, yes := false, true
	return Serving{
		Address: "0.0.0.0",
		Port:    DefaultPort,
		Authentication: kubeletv1beta1.KubeletAuthentication{
			Anonymous: kubeletv1beta1.KubeletAnonymousAuthentication{Enabled: &no},
			Webhook:   kubeletv1beta1.KubeletWebhookAuthentication{Enabled: &yes},
		},
		Authorization: kubeletv1beta1.KubeletAuthorization{Mode: kubeletv1beta1.KubeletAuthorizationModeWebhook},
	}
}

// ServingFlags binds the kubelet's serving flags.
type ServingFlags struct {
	f         *Flags
	s         Serving
	clientCA  string
	anonymous bool
	webhook   bool
	mode      string
}

// AddServingFlags registers --address, --port, the TLS and the authentication/authorization flags
// on f's flag set; they override f's --config file.
func AddServingFlags(f *Flags) *ServingFlags {
	sf := &ServingFlags{f: f, s: DefaultServing(), webhook: true, mode: string(kubeletv1beta1.KubeletAuthorizationModeWebhook)}
	fs := f.fs
	fs.StringVar(&sf.s.Address, "address", sf.s.Address, "the IP address the agent's HTTPS API listens on")
	fs.IntVar(&sf.s.Port, "port", sf.s.Port, "the port of the agent's HTTPS API (served with --kubeconfig, or when given); 0 disables it")
	fs.StringVar(&sf.s.TLSCertFile, "tls-cert-file", "", "the API's serving certificate (PEM); without it a self-signed one is made under --root-dir/pki")
	fs.StringVar(&sf.s.TLSPrivateKeyFile, "tls-private-key-file", "", "the key of --tls-cert-file")
	fs.BoolVar(&sf.s.ServerTLSBootstrap, "rotate-server-certificates", false, "request the serving certificate from the cluster by CSR, and renew it (serverTLSBootstrap)")
	fs.StringVar(&sf.clientCA, "client-ca-file", "", "CA bundle client certificates of the API are checked against")
	fs.BoolVar(&sf.anonymous, "anonymous-auth", false, "let requests without credentials in as system:anonymous (still authorized)")
	fs.BoolVar(&sf.webhook, "authentication-token-webhook", true, "check bearer tokens with a TokenReview")
	fs.StringVar(&sf.mode, "authorization-mode", sf.mode, "Webhook (SubjectAccessReview) or AlwaysAllow")
	return sf
}

// Serving resolves the --config file and the serving flags.
func (sf *ServingFlags) Serving() (Serving, error) {
	s := DefaultServing()
	if file := sf.f.configFile; file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return Serving{}, fmt.Errorf("--config: %w", err)
		}
		if err := ApplyServingConfiguration(&s, b); err != nil {
			return Serving{}, fmt.Errorf("--config %s: %w", file, err)
		}
	}
	sf.f.fs.Visit(func(fl *pflag.Flag) {
		switch fl.Name {
		case "address":
			s.Address = sf.s.Address
		case "port":
			s.Port, s.PortSet = sf.s.Port, true
		case "tls-cert-file":
			s.TLSCertFile = sf.s.TLSCertFile
		case "tls-private-key-file":
			s.TLSPrivateKeyFile = sf.s.TLSPrivateKeyFile
		case "rotate-server-certificates":
			s.ServerTLSBootstrap = sf.s.ServerTLSBootstrap
		case "client-ca-file":
			s.Authentication.X509.ClientCAFile = sf.clientCA
		case "anonymous-auth":
			v := sf.anonymous
			s.Authentication.Anonymous.Enabled = &v
		case "authentication-token-webhook":
			v := sf.webhook
			s.Authentication.Webhook.Enabled = &v
		case "authorization-mode":
			s.Authorization.Mode = kubeletv1beta1.KubeletAuthorizationMode(sf.mode)
		}
	})
	return s, s.check()
}

func (s Serving) check() error {
	if net.ParseIP(s.Address) == nil {
		return fmt.Errorf("address %q: not an IP address", s.Address)
	}
	if s.Port < 0 || s.Port > 65535 {
		return fmt.Errorf("port %d: out of range", s.Port)
	}
	if (s.TLSCertFile == "") != (s.TLSPrivateKeyFile == "") {
		return fmt.Errorf("tlsCertFile and tlsPrivateKeyFile go together")
	}
	switch s.Authorization.Mode {
	case kubeletv1beta1.KubeletAuthorizationModeWebhook, kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow:
	default:
		return fmt.Errorf("authorization mode %q: want Webhook or AlwaysAllow", s.Authorization.Mode)
	}
	return nil
}

// ApplyServingConfiguration applies a KubeletConfiguration's serving fields; fields the file
// leaves out keep their values. ApplyKubeletConfiguration has checked the rest of the file.
func ApplyServingConfiguration(s *Serving, data []byte) error {
	var kc kubeletv1beta1.KubeletConfiguration
	if err := yaml.UnmarshalStrict(data, &kc); err != nil {
		return fmt.Errorf("decode KubeletConfiguration: %w", err)
	}
	if kc.Address != "" {
		s.Address = kc.Address
	}
	if kc.Port != 0 {
		s.Port, s.PortSet = int(kc.Port), true
	}
	if kc.EnableServer != nil && !*kc.EnableServer {
		s.Port, s.PortSet = 0, true
	}
	if kc.TLSCertFile != "" {
		s.TLSCertFile = kc.TLSCertFile
	}
	if kc.TLSPrivateKeyFile != "" {
		s.TLSPrivateKeyFile = kc.TLSPrivateKeyFile
	}
	if kc.ServerTLSBootstrap {
		s.ServerTLSBootstrap = true
	}
	a := kc.Authentication
	if a.X509.ClientCAFile != "" {
		s.Authentication.X509.ClientCAFile = a.X509.ClientCAFile
	}
	if a.Anonymous.Enabled != nil {
		s.Authentication.Anonymous.Enabled = a.Anonymous.Enabled
	}
	if a.Webhook.Enabled != nil {
		s.Authentication.Webhook.Enabled = a.Webhook.Enabled
	}
	if a.Webhook.CacheTTL.Duration > 0 {
		s.Authentication.Webhook.CacheTTL = a.Webhook.CacheTTL
	}
	z := kc.Authorization
	if z.Mode != "" {
		s.Authorization.Mode = z.Mode
	}
	if z.Webhook.CacheAuthorizedTTL.Duration > 0 {
		s.Authorization.Webhook.CacheAuthorizedTTL = z.Webhook.CacheAuthorizedTTL
	}
	if z.Webhook.CacheUnauthorizedTTL.Duration > 0 {
		s.Authorization.Webhook.CacheUnauthorizedTTL = z.Webhook.CacheUnauthorizedTTL
	}
	return nil
}

// NoServing refuses a --config file that asks for the HTTPS API where the command (cmd) serves
// none, rather than leaving its address, port, TLS and auth settings silently unused. Settings
// equal to the defaults, a port of 0 and enableServer false ask for nothing and pass.
func (f *Flags) NoServing(cmd string) error {
	if f.configFile == "" {
		return nil
	}
	b, err := os.ReadFile(f.configFile)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	s := DefaultServing()
	if err := ApplyServingConfiguration(&s, b); err != nil {
		return fmt.Errorf("--config %s: %w", f.configFile, err)
	}
	if s.Port == 0 || reflect.DeepEqual(s, DefaultServing()) {
		return nil
	}
	return fmt.Errorf("--config %s: %s serves no HTTPS API, so the file's serving settings (address, port, TLS, "+
		"authentication, authorization, serverTLSBootstrap) would go unused: leave them out, or run nodelet agent", f.configFile, cmd)
}
