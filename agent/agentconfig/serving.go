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

// AddServingFlags registers --address, --port, the TLS and the authentication/authorization flags
// on f's flag set; they override f's --config file, and f's Config has the HTTPS API's settings.
func AddServingFlags(f *Flags) {
	f.serving = true
	// Bound over the file format's defaults, so the help shows them.
	var kc kubeletv1beta1.KubeletConfiguration
	setServingDefaults(&kc)
	addRecorded(f.fs, &f.sets, func(fs *pflag.FlagSet) { bindServingFlags(fs, &kc) })
}

// checkServing checks the HTTPS API's settings.
func checkServing(kc *kubeletv1beta1.KubeletConfiguration) error {
	if net.ParseIP(kc.Address) == nil {
		return fmt.Errorf("address %q: not an IP address", kc.Address)
	}
	if kc.Port < 0 || kc.Port > 65535 {
		return fmt.Errorf("port %d: out of range", kc.Port)
	}
	if (kc.TLSCertFile == "") != (kc.TLSPrivateKeyFile == "") {
		return fmt.Errorf("tlsCertFile and tlsPrivateKeyFile go together")
	}
	switch kc.Authorization.Mode {
	case kubeletv1beta1.KubeletAuthorizationModeWebhook, kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow:
	default:
		return fmt.Errorf("authorization mode %q: want Webhook or AlwaysAllow", kc.Authorization.Mode)
	}
	return nil
}
