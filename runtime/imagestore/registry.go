package imagestore

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"sigs.k8s.io/yaml"

	"github.com/nodelet/nodelet/runtime/errdefs"
)

// RegistryConfig says how to reach registries. It is also the format of the registries file
// (YAML or JSON), for example:
//
//	mirrors:
//	  registry.k8s.io: ["http://127.0.0.1:5000"]
//	insecure: ["registry.lab:5000"]
//	caFiles: ["/etc/nodelet/lab-ca.pem"]
type RegistryConfig struct {
	// Mirrors maps a registry host to base URLs tried first, in order, with the same repository path.
	// An http:// URL is spoken to in plain HTTP. Docker Hub is "docker.io".
	Mirrors map[string][]string `json:"mirrors,omitempty"`
	// Insecure lists registry hosts reached over plain HTTP, or over TLS without verifying the
	// certificate. Loopback registries are plain HTTP by default, as Docker treats them.
	Insecure []string `json:"insecure,omitempty"`
	// CAFiles are PEM files of extra certificate authorities trusted for every registry.
	CAFiles []string `json:"caFiles,omitempty"`
}

// LoadRegistryConfig reads a registries file.
func LoadRegistryConfig(path string) (RegistryConfig, error) {
	var c RegistryConfig
	b, err := os.ReadFile(path)
	if err != nil {
		return c, err
	}
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return c, fmt.Errorf("registries file %s: %v: %w", path, err, errdefs.ErrInvalidArgument)
	}
	return c, nil
}

// AddMirror adds one mirror given as HOST=URL, the form of the --registry-mirror flag.
func (c *RegistryConfig) AddMirror(spec string) error {
	host, raw, ok := strings.Cut(spec, "=")
	if !ok || host == "" || raw == "" {
		return fmt.Errorf("registry mirror %q: want HOST=URL: %w", spec, errdefs.ErrInvalidArgument)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("registry mirror %q: URL must be http(s)://host[:port][/prefix]: %w", spec, errdefs.ErrInvalidArgument)
	}
	if c.Mirrors == nil {
		c.Mirrors = map[string][]string{}
	}
	host = canonicalHost(host)
	c.Mirrors[host] = append(c.Mirrors[host], raw)
	return nil
}

// Auth is the credential for one pull, as CRI's AuthConfig carries it.
type Auth struct {
	Username, Password string
	// Auth is base64("username:password"), Docker's config.json form.
	Auth          string
	IdentityToken string
	RegistryToken string
}

func (a *Auth) authenticator() (authn.Authenticator, error) {
	if a == nil || *a == (Auth{}) {
		return authn.Anonymous, nil
	}
	cfg := authn.AuthConfig{Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken, RegistryToken: a.RegistryToken}
	if a.Auth != "" && cfg.Username == "" {
		raw, err := base64.StdEncoding.DecodeString(a.Auth)
		if err != nil {
			return nil, fmt.Errorf("auth: not base64: %w", errdefs.ErrInvalidArgument)
		}
		u, p, ok := strings.Cut(string(raw), ":")
		if !ok {
			return nil, fmt.Errorf("auth: want base64(user:password): %w", errdefs.ErrInvalidArgument)
		}
		cfg.Username, cfg.Password = u, p
	}
	return authn.FromConfig(cfg), nil
}

// key identifies the credential without revealing it, so pulls with different credentials never
// share one download.
func (a *Auth) key() string {
	if a == nil {
		return ""
	}
	return digestOf([]byte(a.Username + "\x00" + a.Password + "\x00" + a.Auth + "\x00" + a.IdentityToken + "\x00" + a.RegistryToken))
}

// endpoint is one place to fetch a reference from: a mirror or the registry itself.
type endpoint struct {
	ref    name.Reference
	mirror bool
	rt     http.RoundTripper
}

// endpoints lists where to fetch r from: its mirrors in order, then its own registry.
func (s *Store) endpoints(r name.Reference) ([]endpoint, error) {
	var out []endpoint
	host := canonicalHost(r.Context().RegistryStr())
	for _, m := range s.reg.Mirrors[host] {
		u, err := url.Parse(m)
		if err != nil {
			return nil, fmt.Errorf("mirror %q: %v: %w", m, err, errdefs.ErrInvalidArgument)
		}
		repo := r.Context().RepositoryStr()
		if p := strings.Trim(u.Path, "/"); p != "" {
			repo = p + "/" + repo
		}
		var opts []name.Option
		insecure := u.Scheme == "http" || slices.Contains(s.reg.Insecure, u.Host)
		if insecure {
			opts = append(opts, name.Insecure)
		}
		full := u.Host + "/" + repo
		var mr name.Reference
		if d, ok := r.(name.Digest); ok {
			mr, err = name.NewDigest(full+"@"+d.DigestStr(), opts...)
		} else {
			mr, err = name.NewTag(full+":"+r.Identifier(), opts...)
		}
		if err != nil {
			return nil, fmt.Errorf("mirror %q for %s: %v: %w", m, r, err, errdefs.ErrInvalidArgument)
		}
		rt, err := s.transport(insecure && u.Scheme == "https")
		if err != nil {
			return nil, err
		}
		out = append(out, endpoint{ref: mr, mirror: true, rt: manifestLimit{rt}})
	}
	insecure := slices.Contains(s.reg.Insecure, r.Context().RegistryStr()) || slices.Contains(s.reg.Insecure, host)
	ref := r
	if insecure {
		var err error
		ref, err = name.ParseReference(r.String(), name.Insecure)
		if err != nil {
			return nil, fmt.Errorf("%s: %v: %w", r, err, errdefs.ErrInvalidArgument)
		}
	}
	rt, err := s.transport(insecure)
	if err != nil {
		return nil, err
	}
	return append(out, endpoint{ref: ref, rt: manifestLimit{rt}}), nil
}

// transport builds the HTTP transport for one endpoint: the configured CAs, and no certificate
// verification only for registries the operator marked insecure.
func (s *Store) transport(skipVerify bool) (http.RoundTripper, error) {
	if s.rt != nil && len(s.reg.CAFiles) == 0 && !skipVerify {
		return s.rt, nil
	}
	base, ok := s.rt.(*http.Transport)
	if s.rt == nil || !ok {
		if s.rt != nil {
			return s.rt, nil // a custom RoundTripper owns its TLS settings
		}
		base = http.DefaultTransport.(*http.Transport)
	}
	t := base.Clone()
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if t.TLSClientConfig != nil {
		tc = t.TLSClientConfig.Clone()
	}
	if len(s.reg.CAFiles) > 0 {
		pool := tc.RootCAs
		if pool == nil {
			var err error
			if pool, err = x509.SystemCertPool(); err != nil {
				pool = x509.NewCertPool()
			}
		}
		for _, f := range s.reg.CAFiles {
			pem, err := os.ReadFile(f)
			if err != nil {
				return nil, fmt.Errorf("registry CA file: %w", err)
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("registry CA file %s: no PEM certificate: %w", f, errdefs.ErrInvalidArgument)
			}
		}
		tc.RootCAs = pool
	}
	if skipVerify {
		tc.InsecureSkipVerify = true
	}
	t.TLSClientConfig = tc
	return t, nil
}

// Caps on the JSON documents of an image, which are read whole into memory. containers/image
// (CRI-O's) allows 4 MiB for each; a config with a long history can grow past that, hence 8 MiB.
// Layers are streamed to disk and bounded by WithMaxLayerSize and WithDiskReserve instead.
const (
	maxManifestBytes = 4 << 20
	maxConfigBytes   = 8 << 20
)

// errManifestTooLarge says a registry sent a manifest or index above maxManifestBytes.
var errManifestTooLarge = fmt.Errorf("manifest larger than %d bytes: %w", maxManifestBytes, errdefs.ErrResourceExhausted)

// manifestLimit refuses a manifest response whose Content-Length is above maxManifestBytes, and
// cuts one without a length once it passes the cap, so no registry makes a pull hold more.
type manifestLimit struct{ rt http.RoundTripper }

func (m manifestLimit) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := m.rt.RoundTrip(req)
	if err != nil || !strings.Contains(req.URL.Path, "/manifests/") || req.Method != http.MethodGet {
		return resp, err
	}
	if resp.ContentLength > maxManifestBytes {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: Content-Length %d: %w", req.URL.Redacted(), resp.ContentLength, errManifestTooLarge)
	}
	resp.Body = &cappedBody{ReadCloser: resp.Body, left: maxManifestBytes}
	return resp, nil
}

// cappedBody fails a read that goes past left bytes.
type cappedBody struct {
	io.ReadCloser
	left int64
}

func (c *cappedBody) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, errManifestTooLarge
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.ReadCloser.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		return 0, errManifestTooLarge
	}
	return n, err
}
