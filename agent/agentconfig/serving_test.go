package agentconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	kubeletv1beta1 "github.com/nodelet/nodelet/agent/internal/kubeletconfig"
	"github.com/spf13/pflag"
)

func TestServing(t *testing.T) {
	file := filepath.Join(t.TempDir(), "kubelet.yaml")
	os.WriteFile(file, []byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
port: 11250
tlsCertFile: /etc/k/tls.crt
tlsPrivateKeyFile: /etc/k/tls.key
serverTLSBootstrap: true
authentication:
  x509: {clientCAFile: /etc/k/ca.crt}
  webhook: {enabled: false}
authorization:
  mode: AlwaysAllow
`), 0o644)
	tests := []struct {
		name    string
		args    []string
		check   func(t *testing.T, c Config)
		wantErr bool
	}{
		{name: "defaults are the config file's secure ones", check: func(t *testing.T, c Config) {
			if s := c.Kubelet; s.Port != DefaultPort || c.PortSet || *s.Authentication.Anonymous.Enabled || !*s.Authentication.Webhook.Enabled ||
				s.Authorization.Mode != kubeletv1beta1.KubeletAuthorizationModeWebhook {
				t.Fatalf("%+v", s)
			}
		}},
		{name: "file", args: []string{"--config", file}, check: func(t *testing.T, c Config) {
			if s := c.Kubelet; s.Port != 11250 || !c.PortSet || !s.ServerTLSBootstrap || s.TLSCertFile != "/etc/k/tls.crt" || s.Authentication.X509.ClientCAFile != "/etc/k/ca.crt" ||
				*s.Authentication.Webhook.Enabled || s.Authorization.Mode != kubeletv1beta1.KubeletAuthorizationModeAlwaysAllow ||
				*s.Authentication.Anonymous.Enabled {
				t.Fatalf("%+v", s)
			}
		}},
		{name: "flags win over the file", args: []string{"--config", file, "--port", "0", "--client-ca-file", "/x.crt", "--authorization-mode", "Webhook", "--address", "127.0.0.1"},
			check: func(t *testing.T, c Config) {
				if s := c.Kubelet; s.Port != 0 || s.Authentication.X509.ClientCAFile != "/x.crt" || s.Authorization.Mode != kubeletv1beta1.KubeletAuthorizationModeWebhook || s.Address != "127.0.0.1" {
					t.Fatalf("%+v", s)
				}
			}},
		{name: "certificate without key", args: []string{"--tls-cert-file", "/a.crt"}, wantErr: true},
		{name: "bad mode", args: []string{"--authorization-mode", "RBAC"}, wantErr: true},
		{name: "bad address", args: []string{"--address", "localhost"}, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
			f := AddFlags(fs)
			AddServingFlags(f)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			cfg, err := f.Config()
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v", err)
			}
			if err == nil {
				tc.check(t, cfg)
			}
		})
	}
}

func TestNoServingRefusesUnusedServingSettings(t *testing.T) {
	for file, ok := range map[string]bool{
		"":              true,
		"maxPods: 10\n": true,
		"authentication: {anonymous: {enabled: false}}\n":               true, // the default: asks for nothing
		"enableServer: false\ntlsCertFile: /x\ntlsPrivateKeyFile: /y\n": true,
		"port: 10250\n": false,
		"tlsCertFile: /x\ntlsPrivateKeyFile: /y\n": false,
		"authorization: {mode: AlwaysAllow}\n":     false,
	} {
		fs := pflag.NewFlagSet("up", pflag.ContinueOnError)
		f := AddFlags(fs)
		p := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(p, []byte(header+file), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := fs.Parse([]string{"--config=" + p}); err != nil {
			t.Fatal(err)
		}
		err := f.NoServing("nodelet up")
		if (err == nil) != ok || (err != nil && !strings.Contains(err.Error(), "nodelet up serves no HTTPS API")) {
			t.Errorf("%q: err %v, want ok=%v", file, err, ok)
		}
	}
}
