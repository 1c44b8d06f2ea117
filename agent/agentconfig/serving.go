package agentconfig

import (
	"fmt"
	"net"

	kubeletv1beta1 "github.com/nodelet/nodelet/agent/internal/kubeletconfig"
	"github.com/spf13/pflag"
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

// AddServingFlags registers --address, --port, the TLS and the authentication/authorization flags
// on f's flag set; they override f's --config file, and f's Config has the HTTPS API's settings.
func AddServingFlags(f *Flags) {
	f.serving = true
	// Bound over the file format's defaults, so the help shows them.
	var kc kubeletv1beta1.KubeletConfiguration
	setServingDefaults(&kc)
	addRecorded(f.fs, &f.sets, func(fs *pflag.FlagSet) { bindServingFlags(fs, &kc) })
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
