// Package kubeconfig turns a kubeconfig file into a client configuration, as client-go's
// clientcmd.BuildConfigFromFlags("", path) does, without linking clientcmd.
//
// clientcmd decodes the file through a scheme of its own (tools/clientcmd/api/latest, built by a
// package init) and links the generated conversions of its v1 types. Every mode of nodelet runs
// every linked init, so `nodelet runtime` paid for the agent's --kubeconfig in pages and heap
// (about 0.6 MB of its idle RSS). This reads the file format directly: the v1 types' JSON names,
// the same YAML-to-JSON decoding (case-sensitive, unknown fields ignored), the same relative path
// resolution, defaults and checks, and the same rest.Config; kubeconfig_test.go compares the two on
// a table of files.
package kubeconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/internal/regularfile"
)

// The v1 file format (k8s.io/client-go/tools/clientcmd/api/v1), the fields a client config uses.
type file struct {
	Kind           string         `json:"kind,omitempty"`
	APIVersion     string         `json:"apiVersion,omitempty"`
	Clusters       []namedCluster `json:"clusters"`
	AuthInfos      []namedUser    `json:"users"`
	Contexts       []namedContext `json:"contexts"`
	CurrentContext string         `json:"current-context"`
}

type namedCluster struct {
	Name    string  `json:"name"`
	Cluster cluster `json:"cluster"`
}

type cluster struct {
	Server                   string           `json:"server"`
	TLSServerName            string           `json:"tls-server-name,omitempty"`
	InsecureSkipTLSVerify    bool             `json:"insecure-skip-tls-verify,omitempty"`
	CertificateAuthority     string           `json:"certificate-authority,omitempty"`
	CertificateAuthorityData []byte           `json:"certificate-authority-data,omitempty"`
	ProxyURL                 string           `json:"proxy-url,omitempty"`
	DisableCompression       bool             `json:"disable-compression,omitempty"`
	Extensions               []namedExtension `json:"extensions,omitempty"`
}

type namedExtension struct {
	Name      string          `json:"name"`
	Extension json.RawMessage `json:"extension"`
}

type namedUser struct {
	Name string `json:"name"`
	User user   `json:"user"`
}

type user struct {
	ClientCertificate     string                           `json:"client-certificate,omitempty"`
	ClientCertificateData []byte                           `json:"client-certificate-data,omitempty"`
	ClientKey             string                           `json:"client-key,omitempty"`
	ClientKeyData         []byte                           `json:"client-key-data,omitempty"`
	Token                 string                           `json:"token,omitempty"`
	TokenFile             string                           `json:"tokenFile,omitempty"`
	Impersonate           string                           `json:"as,omitempty"`
	ImpersonateUID        string                           `json:"as-uid,omitempty"`
	ImpersonateGroups     []string                         `json:"as-groups,omitempty"`
	ImpersonateUserExtra  map[string][]string              `json:"as-user-extra,omitempty"`
	Username              string                           `json:"username,omitempty"`
	Password              string                           `json:"password,omitempty"`
	AuthProvider          *clientcmdapi.AuthProviderConfig `json:"auth-provider,omitempty"`
	Exec                  *execConfig                      `json:"exec,omitempty"`
}

type execConfig struct {
	Command            string                    `json:"command"`
	Args               []string                  `json:"args"`
	Env                []clientcmdapi.ExecEnvVar `json:"env"`
	APIVersion         string                    `json:"apiVersion,omitempty"`
	InstallHint        string                    `json:"installHint,omitempty"`
	ProvideClusterInfo bool                      `json:"provideClusterInfo"`
	InteractiveMode    string                    `json:"interactiveMode,omitempty"`
}

type namedContext struct {
	Name    string  `json:"name"`
	Context context `json:"context"`
}

type context struct {
	Cluster  string `json:"cluster"`
	AuthInfo string `json:"user"`
}

// execExtension is the cluster extension handed to an exec plugin (clientcmd's clusterExtensionKey).
const execExtension = "client.authentication.k8s.io/exec"

// Bounds on the files a kubeconfig names: far above any real one, low enough that a wrong path
// (a log, a device) fails at once instead of filling memory.
const (
	maxKubeconfig = 4 << 20
	maxTokenFile  = 1 << 20
)

// Load reads the kubeconfig at path and returns the client configuration of its current context.
func Load(path string) (*rest.Config, error) {
	data, err := regularfile.Read(path, maxKubeconfig)
	if err != nil {
		return nil, err
	}
	var f file
	if len(bytes.TrimSpace(data)) > 0 {
		j, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(j, &f); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if (f.APIVersion != "" && f.APIVersion != "v1") || (f.Kind != "" && f.Kind != "Config") {
		return nil, fmt.Errorf("%s: a kubeconfig is apiVersion v1, kind Config; not %q, %q", path, f.APIVersion, f.Kind)
	}
	base, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	return f.clientConfig(base)
}

func (f *file) clientConfig(base string) (*rest.Config, error) {
	// clientcmd turns each list into a map and refuses a name given twice.
	if err := unique("cluster", f.Clusters, func(c namedCluster) string { return c.Name }); err != nil {
		return nil, err
	}
	if err := unique("user", f.AuthInfos, func(u namedUser) string { return u.Name }); err != nil {
		return nil, err
	}
	if err := unique("context", f.Contexts, func(c namedContext) string { return c.Name }); err != nil {
		return nil, err
	}
	var errs []error
	var ctx context
	if i := slices.IndexFunc(f.Contexts, func(c namedContext) bool { return c.Name == f.CurrentContext }); i >= 0 {
		ctx = f.Contexts[i].Context
	} else if f.CurrentContext != "" {
		errs = append(errs, fmt.Errorf("context was not found for specified context: %v", f.CurrentContext))
	}
	// A cluster or user the context does not name is empty; an empty cluster fails the checks.
	var cl cluster
	clusterFound := false
	if i := slices.IndexFunc(f.Clusters, func(c namedCluster) bool { return c.Name == ctx.Cluster }); i >= 0 {
		cl, clusterFound = f.Clusters[i].Cluster, true
	}
	var u user
	if i := slices.IndexFunc(f.AuthInfos, func(a namedUser) bool { return a.Name == ctx.AuthInfo }); i >= 0 {
		u = f.AuthInfos[i].User
	}
	resolve(base, &cl.CertificateAuthority)
	resolve(base, &u.ClientCertificate)
	resolve(base, &u.ClientKey)
	resolve(base, &u.TokenFile)
	if u.Exec != nil && strings.ContainsRune(u.Exec.Command, filepath.Separator) {
		resolve(base, &u.Exec.Command)
	}
	if u.Exec != nil && u.Exec.InteractiveMode == "" {
		switch u.Exec.APIVersion {
		case "client.authentication.k8s.io/v1beta1", "client.authentication.k8s.io/v1alpha1":
			u.Exec.InteractiveMode = string(clientcmdapi.IfAvailableExecInteractiveMode)
		}
	}

	errs = append(errs, u.validate(ctx.AuthInfo)...)
	clusterErrs := []error{errEmptyCluster}
	if clusterFound {
		clusterErrs = cl.validate(ctx.Cluster)
	}
	if len(errs) == 0 && len(clusterErrs) == 1 && clusterErrs[0] == errEmptyCluster {
		return nil, errors.New("invalid configuration: no configuration has been provided")
	}
	if errs = append(errs, clusterErrs...); len(errs) > 0 {
		return nil, fmt.Errorf("invalid configuration: %w", errors.Join(errs...))
	}

	c := &rest.Config{Host: cl.Server, DisableCompression: cl.DisableCompression}
	if cl.ProxyURL != "" {
		p, err := parseProxyURL(cl.ProxyURL)
		if err != nil {
			return nil, err
		}
		c.Proxy = http.ProxyURL(p)
	}
	if h, err := url.ParseRequestURI(c.Host); err == nil && h.Opaque == "" && len(h.Path) > 1 {
		h.RawQuery = ""
		h.Fragment = ""
		c.Host = h.String()
	}
	if u.Impersonate != "" {
		if u.ImpersonateUserExtra == nil {
			u.ImpersonateUserExtra = map[string][]string{} // as clientcmd hands it over
		}
		c.Impersonate = rest.ImpersonationConfig{
			UserName: u.Impersonate, UID: u.ImpersonateUID, Groups: u.ImpersonateGroups, Extra: u.ImpersonateUserExtra,
		}
	}
	// Like clientcmd, the user's credentials and the server's CA only go to a TLS transport (an
	// https server, judged before the CA is set).
	if !rest.IsConfigTransportTLS(*c) {
		return c, nil
	}
	if u.Token != "" {
		c.BearerToken, c.BearerTokenFile = u.Token, u.TokenFile
	} else if u.TokenFile != "" {
		b, err := regularfile.Read(u.TokenFile, maxTokenFile)
		if err != nil {
			return nil, err
		}
		c.BearerToken, c.BearerTokenFile = string(b), u.TokenFile
	}
	if u.ClientCertificate != "" || len(u.ClientCertificateData) > 0 {
		c.CertFile, c.CertData = u.ClientCertificate, u.ClientCertificateData
		c.KeyFile, c.KeyData = u.ClientKey, u.ClientKeyData
	}
	if u.Username != "" || u.Password != "" {
		c.Username, c.Password = u.Username, u.Password
	}
	c.AuthProvider = u.AuthProvider
	if e := u.Exec; e != nil {
		c.ExecProvider = &clientcmdapi.ExecConfig{
			Command:            e.Command,
			Args:               e.Args,
			Env:                e.Env,
			APIVersion:         e.APIVersion,
			InstallHint:        printableHint(e.InstallHint),
			ProvideClusterInfo: e.ProvideClusterInfo,
			InteractiveMode:    clientcmdapi.ExecInteractiveMode(e.InteractiveMode),
		}
		for _, x := range cl.Extensions {
			if x.Name == execExtension {
				c.ExecProvider.Config = rawObject(x.Extension)
			}
		}
	}
	c.CAFile, c.CAData = cl.CertificateAuthority, cl.CertificateAuthorityData
	c.Insecure, c.ServerName = cl.InsecureSkipTLSVerify, cl.TLSServerName
	return c, nil
}

// rawObject is apimachinery's conversion of a RawExtension to a runtime.Object, as clientcmd's
// v1 conversion applies it to a cluster's extensions.
func rawObject(raw json.RawMessage) runtime.Object {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}
}

func unique[T any](what string, list []T, name func(T) string) error {
	seen := make(map[string]bool, len(list))
	for _, x := range list {
		if n := name(x); seen[n] {
			return fmt.Errorf("duplicate %s name %q", what, n)
		} else {
			seen[n] = true
		}
	}
	return nil
}

// resolve makes a relative path relative to the kubeconfig's folder.
func resolve(base string, p *string) {
	if *p != "" && !filepath.IsAbs(*p) {
		*p = filepath.Join(base, *p)
	}
}

var errEmptyCluster = errors.New("cluster has no server defined")

// validate is clientcmd's validateClusterInfo for a cluster the file holds (never empty there:
// clientcmd notes each one's file).
func (cl *cluster) validate(name string) []error {
	var errs []error
	if cl.Server == "" {
		if name == "" {
			errs = append(errs, errors.New("default cluster has no server defined"))
		} else {
			errs = append(errs, fmt.Errorf("no server found for cluster %q", name))
		}
	}
	if cl.ProxyURL != "" {
		if _, err := parseProxyURL(cl.ProxyURL); err != nil {
			errs = append(errs, fmt.Errorf("invalid 'proxy-url' %q for cluster %q: %w", cl.ProxyURL, name, err))
		}
	}
	if cl.CertificateAuthority != "" && len(cl.CertificateAuthorityData) > 0 {
		errs = append(errs, fmt.Errorf("certificate-authority-data and certificate-authority are both specified for %v. certificate-authority-data will override.", name))
	}
	if cl.CertificateAuthority != "" {
		if err := readable(cl.CertificateAuthority); err != nil {
			errs = append(errs, fmt.Errorf("unable to read certificate-authority %v for %v due to %w", cl.CertificateAuthority, name, err))
		}
	}
	return errs
}

// validate is clientcmd's validateAuthInfo.
func (u *user) validate(name string) []error {
	var errs []error
	var methods []string
	if u.Token != "" {
		methods = append(methods, "token")
	}
	if u.Username != "" || u.Password != "" {
		methods = append(methods, "basicAuth")
	}
	if u.ClientCertificate != "" || len(u.ClientCertificateData) > 0 {
		if u.ClientCertificate != "" && len(u.ClientCertificateData) > 0 {
			errs = append(errs, fmt.Errorf("client-cert-data and client-cert are both specified for %v. client-cert-data will override.", name))
		}
		if u.ClientKey != "" && len(u.ClientKeyData) > 0 {
			errs = append(errs, fmt.Errorf("client-key-data and client-key are both specified for %v; client-key-data will override", name))
		}
		if u.ClientKey == "" && len(u.ClientKeyData) == 0 {
			errs = append(errs, fmt.Errorf("client-key-data or client-key must be specified for %v to use the clientCert authentication method.", name))
		}
		if u.ClientCertificate != "" {
			if err := readable(u.ClientCertificate); err != nil {
				errs = append(errs, fmt.Errorf("unable to read client-cert %v for %v due to %w", u.ClientCertificate, name, err))
			}
		}
		if u.ClientKey != "" {
			if err := readable(u.ClientKey); err != nil {
				errs = append(errs, fmt.Errorf("unable to read client-key %v for %v due to %w", u.ClientKey, name, err))
			}
		}
	}
	if e := u.Exec; e != nil {
		if u.AuthProvider != nil {
			errs = append(errs, fmt.Errorf("authProvider cannot be provided in combination with an exec plugin for %s", name))
		}
		if e.Command == "" {
			errs = append(errs, fmt.Errorf("command must be specified for %v to use exec authentication plugin", name))
		}
		if e.APIVersion == "" {
			errs = append(errs, fmt.Errorf("apiVersion must be specified for %v to use exec authentication plugin", name))
		}
		for _, v := range e.Env {
			if v.Name == "" {
				errs = append(errs, fmt.Errorf("env variable name must be specified for %v to use exec authentication plugin", name))
			}
		}
		switch clientcmdapi.ExecInteractiveMode(e.InteractiveMode) {
		case "":
			errs = append(errs, fmt.Errorf("interactiveMode must be specified for %v to use exec authentication plugin", name))
		case clientcmdapi.NeverExecInteractiveMode, clientcmdapi.IfAvailableExecInteractiveMode, clientcmdapi.AlwaysExecInteractiveMode:
		default:
			errs = append(errs, fmt.Errorf("invalid interactiveMode for %v: %q", name, e.InteractiveMode))
		}
	}
	if len(methods) > 1 {
		errs = append(errs, fmt.Errorf("more than one authentication method found for %v; found %v, only one is allowed", name, methods))
	}
	if (u.ImpersonateUID != "" || len(u.ImpersonateGroups) > 0 || len(u.ImpersonateUserExtra) > 0) && u.Impersonate == "" {
		errs = append(errs, fmt.Errorf("requesting uid, groups or user-extra for %v without impersonating a user", name))
	}
	return errs
}

// readable checks that path is a regular file this process can open: opening a FIFO for reading
// would block until someone writes to it.
func readable(path string) error {
	if fi, err := os.Stat(path); err != nil {
		return err
	} else if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}

// parseProxyURL accepts the proxies a REST transport can dial: HTTP, HTTPS and SOCKS5.
func parseProxyURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("proxy-url %q: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" && u.Scheme != "socks5" {
		return nil, fmt.Errorf("proxy-url %q: scheme %q is not http, https or socks5", raw, u.Scheme)
	}
	return u, nil
}

// printableHint keeps an exec plugin's install hint to printable text: the hint is shown on a
// terminal, so every rune that is neither graphic nor white space (escape sequences among them)
// is written out as its code point instead.
func printableHint(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsGraphic(r) || unicode.IsSpace(r) {
			b.WriteRune(r)
		} else {
			fmt.Fprintf(&b, "%U", r)
		}
	}
	return b.String()
}
