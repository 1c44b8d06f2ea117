package auth

import (
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"

	kubeletconfig "github.com/nodelet/nodelet/agent/internal/kubeletconfig"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

func TestFromConfig(t *testing.T) {
	ca := testutil.NewCA(t, "client-ca")
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw}), 0o644)
	yes, no := true, false
	tests := []struct {
		name    string
		authn   kubeletconfig.KubeletAuthentication
		authz   kubeletconfig.KubeletAuthorization
		cluster bool
		wantErr bool
		authzT  string
	}{
		{name: "client CA, always allow",
			authn: kubeletconfig.KubeletAuthentication{X509: kubeletconfig.KubeletX509Authentication{ClientCAFile: caFile}},
			authz: kubeletconfig.KubeletAuthorization{Mode: kubeletconfig.KubeletAuthorizationModeAlwaysAllow}, authzT: "always"},
		{name: "cluster webhook",
			authn:   kubeletconfig.KubeletAuthentication{X509: kubeletconfig.KubeletX509Authentication{ClientCAFile: caFile}, Webhook: kubeletconfig.KubeletWebhookAuthentication{Enabled: &yes}},
			authz:   kubeletconfig.KubeletAuthorization{Mode: kubeletconfig.KubeletAuthorizationModeWebhook},
			cluster: true, authzT: "webhook"},
		{name: "webhook without a cluster",
			authn:   kubeletconfig.KubeletAuthentication{Webhook: kubeletconfig.KubeletWebhookAuthentication{Enabled: &yes}},
			authz:   kubeletconfig.KubeletAuthorization{Mode: kubeletconfig.KubeletAuthorizationModeAlwaysAllow},
			wantErr: true},
		{name: "no authentication at all",
			authn:   kubeletconfig.KubeletAuthentication{Anonymous: kubeletconfig.KubeletAnonymousAuthentication{Enabled: &no}},
			authz:   kubeletconfig.KubeletAuthorization{Mode: kubeletconfig.KubeletAuthorizationModeAlwaysAllow},
			wantErr: true},
		{name: "anonymous with always allow",
			authn:   kubeletconfig.KubeletAuthentication{Anonymous: kubeletconfig.KubeletAnonymousAuthentication{Enabled: &yes}, X509: kubeletconfig.KubeletX509Authentication{ClientCAFile: caFile}},
			authz:   kubeletconfig.KubeletAuthorization{Mode: kubeletconfig.KubeletAuthorizationModeAlwaysAllow},
			wantErr: true},
		{name: "missing CA file",
			authn:   kubeletconfig.KubeletAuthentication{X509: kubeletconfig.KubeletX509Authentication{ClientCAFile: caFile + ".nope"}},
			authz:   kubeletconfig.KubeletAuthorization{Mode: kubeletconfig.KubeletAuthorizationModeAlwaysAllow},
			wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tokens TokenReviewer
			var sar SubjectAccessReviewer
			if tc.cluster {
				tokens, sar = &fakeTokens{}, &fakeSAR{}
			}
			f, err := FromConfig(tc.authn, tc.authz, tokens, sar, "node1")
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if err != nil {
				return
			}
			switch f.Authz.(type) {
			case AlwaysAllow:
				if tc.authzT != "always" {
					t.Fatalf("authz %T", f.Authz)
				}
			case *Webhook:
				if tc.authzT != "webhook" {
					t.Fatalf("authz %T", f.Authz)
				}
			}
		})
	}
}

func TestServingCertManagerConstructs(t *testing.T) {
	m, err := ServingCertManager(nil, "node1", []string{"node1", "10.0.0.1"}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if m.Current() != nil {
		t.Fatal("a certificate before any was requested")
	}
}
