package auth

import (
	"fmt"
	"time"

	kubeletconfig "github.com/nodelet/nodelet/agent/internal/kubeletconfig"
)

// FromConfig builds the TCP API's filter from a KubeletConfiguration's authentication and
// authorization sections, so users' existing kubelet config files mean the same here. tokens and
// sar are the apiserver clients (clientset.AuthenticationV1().TokenReviews() and
// clientset.AuthorizationV1().SubjectAccessReviews()); they may be nil in standalone mode, where
// webhook modes are then refused.
func FromConfig(authn kubeletconfig.KubeletAuthentication, authz kubeletconfig.KubeletAuthorization, tokens TokenReviewer, sar SubjectAccessReviewer, node string) (*Filter, error) {
	f := &Filter{Node: node}
	if authn.Anonymous.Enabled != nil {
		f.AllowAnonymous = *authn.Anonymous.Enabled
	}
	var union Union
	if file := authn.X509.ClientCAFile; file != "" {
		pool, err := LoadCAPool(file)
		if err != nil {
			return nil, fmt.Errorf("authentication.x509.clientCAFile: %w", err)
		}
		union = append(union, X509{Roots: pool})
	}
	if authn.Webhook.Enabled != nil && *authn.Webhook.Enabled {
		if tokens == nil {
			return nil, fmt.Errorf("authentication.webhook.enabled needs an apiserver (run with --kubeconfig)")
		}
		union = append(union, &Token{Reviewer: tokens, TTL: authn.Webhook.CacheTTL.Duration})
	}
	if len(union) == 0 && !f.AllowAnonymous {
		return nil, fmt.Errorf("the agent API over TCP needs authentication.x509.clientCAFile, authentication.webhook or anonymous access")
	}
	f.Authn = union
	switch authz.Mode {
	case kubeletconfig.KubeletAuthorizationModeAlwaysAllow:
		if f.AllowAnonymous {
			// Anonymous plus AlwaysAllow would hand exec to anyone who can reach the port.
			return nil, fmt.Errorf("authorization.mode AlwaysAllow with anonymous authentication opens exec to everyone; refusing")
		}
		f.Authz = AlwaysAllow{}
	case kubeletconfig.KubeletAuthorizationModeWebhook, "":
		if sar == nil {
			return nil, fmt.Errorf("authorization.mode Webhook needs an apiserver (run with --kubeconfig, or use AlwaysAllow with client certificates)")
		}
		f.Authz = &Webhook{Reviewer: sar, AllowTTL: ttlOr(authz.Webhook.CacheAuthorizedTTL.Duration, 5*time.Minute), DenyTTL: ttlOr(authz.Webhook.CacheUnauthorizedTTL.Duration, 30*time.Second)}
	default:
		return nil, fmt.Errorf("authorization.mode %q: want AlwaysAllow or Webhook", authz.Mode)
	}
	return f, nil
}

func ttlOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
