package kubeconfig

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// TestSameAsClientcmd loads each file with Load and with clientcmd.BuildConfigFromFlags("", path),
// which the agent called before, and wants the same configuration or an error from both.
func TestSameAsClientcmd(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"ca.crt", "client.crt", "client.key", "token"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("data of "+f+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "") // no in-cluster fallback for clientcmd
	t.Setenv("KUBERNETES_MASTER", "")

	const head = "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n"
	cases := map[string]string{
		"client certificate files, relative": head + `clusters:
- name: k
  cluster:
    server: https://10.0.0.1:6443/prefix/?q=1#frag
    certificate-authority: ca.crt
users:
- name: u
  user:
    client-certificate: client.crt
    client-key: ` + filepath.Join(dir, "client.key") + `
`,
		"embedded data, server name, no compression": head + `clusters:
- name: k
  cluster:
    server: https://api.example:443
    certificate-authority-data: Y2EgZGF0YQ==
    tls-server-name: kubernetes
    disable-compression: true
users:
- name: u
  user:
    client-certificate-data: Y2VydA==
    client-key-data: a2V5
`,
		"token": head + `clusters:
- name: k
  cluster: {server: "https://h:6443", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: abc, tokenFile: token}
`,
		"token file": head + `clusters:
- name: k
  cluster: {server: "https://h:6443", insecure-skip-tls-verify: true}
users:
- name: u
  user: {tokenFile: token}
`,
		"missing token file": head + `clusters:
- name: k
  cluster: {server: "https://h:6443"}
users:
- name: u
  user: {tokenFile: nothere}
`,
		"plain http drops credentials": head + `clusters:
- name: k
  cluster: {server: "http://127.0.0.1:8080"}
users:
- name: u
  user: {token: abc, as: someone}
`,
		"no scheme is http": head + `clusters:
- name: k
  cluster: {server: "10.0.0.1:6443", certificate-authority: ca.crt}
users:
- name: u
  user: {username: a, password: b}
`,
		"basic auth": head + `clusters:
- name: k
  cluster: {server: "https://h"}
users:
- name: u
  user: {username: a, password: b}
`,
		"two methods": head + `clusters:
- name: k
  cluster: {server: "https://h"}
users:
- name: u
  user: {username: a, token: b}
`,
		"impersonation": head + `clusters:
- name: k
  cluster: {server: "https://h"}
users:
- name: u
  user:
    token: t
    as: alice
    as-uid: "42"
    as-groups: [g1, g2]
    as-user-extra: {scopes: [a, b]}
`,
		"groups without user": head + `clusters:
- name: k
  cluster: {server: "https://h"}
users:
- name: u
  user: {token: t, as-groups: [g]}
`,
		"exec v1beta1 defaulted, cluster extension, hint cleaned": head + `clusters:
- name: k
  cluster:
    server: https://h
    extensions:
    - name: client.authentication.k8s.io/exec
      extension: {audience: x, n: 1}
    - name: other
      extension: {a: b}
users:
- name: u
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: ./bin/plugin
      args: [--flag]
      env: [{name: A, value: b}]
      installHint: "install it` + "\\u001b[31m" + `\tnow"
      provideClusterInfo: true
`,
		"exec from PATH": head + `clusters:
- name: k
  cluster: {server: "https://h"}
users:
- name: u
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: plugin, interactiveMode: Never}
`,
		"exec v1 needs interactiveMode": head + `clusters:
- name: k
  cluster: {server: "https://h"}
users:
- name: u
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: plugin}
`,
		"exec without command": head + `clusters:
- name: k
  cluster: {server: "https://h"}
users:
- name: u
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1beta1}
`,
		"auth provider": head + `clusters:
- name: k
  cluster: {server: "https://h"}
users:
- name: u
  user:
    auth-provider: {name: oidc, config: {client-id: x}}
`,
		"proxy": head + `clusters:
- name: k
  cluster: {server: "https://h", proxy-url: "socks5://127.0.0.1:1080"}
users:
- name: u
  user: {token: t}
`,
		"bad proxy scheme": head + `clusters:
- name: k
  cluster: {server: "https://h", proxy-url: "ftp://p"}
`,
		"CA file and data": head + `clusters:
- name: k
  cluster: {server: "https://h", certificate-authority: ca.crt, certificate-authority-data: Y2E=}
`,
		"missing CA file": head + `clusters:
- name: k
  cluster: {server: "https://h", certificate-authority: nothere.crt}
`,
		"certificate without key": head + `clusters:
- name: k
  cluster: {server: "https://h"}
users:
- name: u
  user: {client-certificate: client.crt}
`,
		"no user entry": head + `clusters:
- name: k
  cluster: {server: "https://h"}
`,
		"missing context":         "current-context: nope\nclusters:\n- name: k\n  cluster: {server: https://h}\n",
		"missing cluster":         head,
		"cluster without server":  head + "clusters:\n- name: k\n  cluster: {insecure-skip-tls-verify: true}\n",
		"no current context":      "clusters:\n- name: k\n  cluster: {server: https://h}\n",
		"unnamed everything":      "contexts:\n- name: \"\"\n  context: {cluster: \"\", user: \"\"}\nclusters:\n- name: \"\"\n  cluster: {server: https://h}\n",
		"duplicate cluster":       head + "clusters:\n- name: k\n  cluster: {server: https://h}\n- name: k\n  cluster: {server: https://i}\n",
		"duplicate unused user":   head + "clusters:\n- name: k\n  cluster: {server: https://h}\nusers:\n- {name: x, user: {}}\n- {name: x, user: {}}\n",
		"keys are case-sensitive": head + "clusters:\n- name: k\n  cluster: {Server: https://h}\n",
		"unknown fields ignored":  head + "preferences: {colors: true}\nclusters:\n- name: k\n  cluster: {server: https://h, whatever: 1}\n",
		"no kind or version":      "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k}\nclusters:\n- name: k\n  cluster: {server: https://h}\n",
		"other version":           "apiVersion: v2\nkind: Config\n",
		"empty file":              "",
		"not yaml":                "clusters: [\n",
	}
	for name, content := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, "kubeconfig")
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			want, wantErr := clientcmd.BuildConfigFromFlags("", path)
			got, err := Load(path)
			if (err != nil) != (wantErr != nil) {
				t.Fatalf("Load: %v (%+v); clientcmd: %v", err, got, wantErr)
			}
			if err != nil {
				return
			}
			if (got.Proxy == nil) != (want.Proxy == nil) {
				t.Fatalf("proxy: %v, clientcmd %v", got.Proxy != nil, want.Proxy != nil)
			}
			if got.Proxy != nil {
				req := &http.Request{URL: &url.URL{Scheme: "https", Host: "h"}}
				g, _ := got.Proxy(req)
				w, _ := want.Proxy(req)
				if g.String() != w.String() {
					t.Errorf("proxy %v, clientcmd %v", g, w)
				}
			}
			got.Proxy, want.Proxy = nil, nil
			want.AuthConfigPersister = nil // clientcmd's writes back to the file; nodelet has no auth provider plugins
			if !reflect.DeepEqual(got, want) {
				t.Errorf("config differs\n got %s\nwant %s", dump(got), dump(want))
			}
		})
	}
}

func dump(c *rest.Config) string {
	s := c.String()
	if c.ExecProvider != nil {
		s += " exec " + c.ExecProvider.String()
		if c.ExecProvider.Config != nil {
			s += " config " + reflect.ValueOf(c.ExecProvider.Config).Elem().FieldByName("Raw").String()
		}
	}
	return s
}

// TestLoadReadsRegularFilesOnly: a FIFO at the kubeconfig's path or its token file's fails at once
// (it would block a plain read forever), as does a kubeconfig over the bound.
func TestLoadReadsRegularFilesOnly(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(fifo); err == nil {
		t.Fatal("a FIFO read as a kubeconfig")
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, maxKubeconfig+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(big); err == nil {
		t.Fatal("a kubeconfig over the bound read")
	}
	withToken := filepath.Join(dir, "token.kubeconfig")
	if err := os.WriteFile(withToken, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {tokenFile: `+fifo+`}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(withToken); err == nil {
		t.Fatal("a FIFO read as a token file")
	}
	withCA := filepath.Join(dir, "ca.kubeconfig")
	if err := os.WriteFile(withCA, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", certificate-authority: `+fifo+`}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(withCA); err == nil {
		t.Fatal("a FIFO taken as a certificate authority")
	}
}
