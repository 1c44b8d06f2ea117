package auth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/test/harness/testutil"
)

type fakeTokens struct{ calls atomic.Int32 }

func (f *fakeTokens) Create(_ context.Context, tr *authnv1.TokenReview, _ metav1.CreateOptions) (*authnv1.TokenReview, error) {
	f.calls.Add(1)
	if tr.Spec.Token == "good" {
		tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "alice", Groups: []string{"devs"}}}
	}
	return tr, nil
}

// fakeSAR allows "apiserver" everything, "alice" only stats and proxy.
type fakeSAR struct{ seen []string }

func (f *fakeSAR) Create(_ context.Context, s *authzv1.SubjectAccessReview, _ metav1.CreateOptions) (*authzv1.SubjectAccessReview, error) {
	ra := s.Spec.ResourceAttributes
	f.seen = append(f.seen, s.Spec.User+":"+ra.Verb+":"+ra.Subresource)
	switch {
	case ra.Resource != "nodes" || ra.Name != "node1":
	case s.Spec.User == "kube-apiserver-kubelet-client":
		s.Status.Allowed = true
	case s.Spec.User == "alice" && (ra.Subresource == "stats" || ra.Subresource == "proxy"):
		s.Status.Allowed = true
	}
	return s, nil
}

func TestFilter(t *testing.T) {
	ca, other := testutil.NewCA(t, "client-ca"), testutil.NewCA(t, "someone-else")
	tokens := &fakeTokens{}
	sar := &fakeSAR{}
	filter := &Filter{
		Authn: Union{X509{Roots: ca.Pool()}, &Token{Reviewer: tokens}},
		Authz: &Webhook{Reviewer: sar},
		Node:  "node1",
	}
	srv := httptest.NewUnstartedServer(filter.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, _ := UserFrom(r.Context())
		w.Write([]byte(u.Name))
	})))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	defer srv.Close()

	apiserver := ca.Issue(t, "kube-apiserver-kubelet-client", x509.ExtKeyUsageClientAuth, "system:masters")
	serverOnly := ca.Issue(t, "kube-apiserver-kubelet-client", x509.ExtKeyUsageServerAuth)
	stranger := other.Issue(t, "kube-apiserver-kubelet-client", x509.ExtKeyUsageClientAuth)

	tests := []struct {
		name   string
		method string
		path   string
		cert   *tls.Certificate
		token  string
		want   int
	}{
		{name: "no credentials, exec", method: "POST", path: "/exec/default/web/c?command=sh", want: 401},
		{name: "no credentials, logs", method: "GET", path: "/containerLogs/default/web/c", want: 401},
		{name: "client cert", method: "POST", path: "/exec/default/web/c", cert: &apiserver, want: 200},
		{name: "cert of another CA", method: "GET", path: "/containerLogs/default/web/c", cert: &stranger, want: 401},
		{name: "cert without client usage", method: "GET", path: "/pods", cert: &serverOnly, want: 401},
		{name: "good token, allowed subresource", method: "GET", path: "/stats/summary", token: "good", want: 200},
		{name: "good token, denied subresource", method: "GET", path: "/metrics", token: "good", want: 403},
		{name: "good token, pods falls back to proxy", method: "GET", path: "/pods", token: "good", want: 200},
		{name: "bad token", method: "GET", path: "/stats/summary", token: "bad", want: 401},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &tls.Config{InsecureSkipVerify: true}
			if tc.cert != nil {
				cfg.Certificates = []tls.Certificate{*tc.cert}
			}
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.want)
			}
		})
	}
	if n := tokens.calls.Load(); n != 2 {
		t.Errorf("token reviews = %d, want 2 (good and bad, each cached)", n)
	}
}

func TestAnonymousStillAuthorized(t *testing.T) {
	filter := &Filter{Authn: Union{}, Authz: &Webhook{Reviewer: &fakeSAR{}}, AllowAnonymous: true, Node: "node1"}
	rec := httptest.NewRecorder()
	filter.Wrap(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest("POST", "/exec/default/web/c", nil))
	if rec.Code != http.StatusForbidden {
		t.Fatalf("anonymous exec: %d, want 403", rec.Code)
	}
}

func TestRequestAttributes(t *testing.T) {
	for _, tc := range []struct{ method, path, verb, sub string }{
		{"GET", "/stats/summary", "get", "stats"},
		{"GET", "/metrics/resource", "get", "metrics"},
		{"GET", "/containerLogs/ns/p/c", "get", "proxy"},
		{"POST", "/exec/ns/p/c", "create", "proxy"},
		{"GET", "/pods", "get", "pods"},
		{"GET", "/healthz", "get", "healthz"},
		{"GET", "/logs/messages", "get", "log"},
		{"GET", "/configz", "get", "configz"},
	} {
		a := RequestAttributes(Anonymous, "n", httptest.NewRequest(tc.method, tc.path, nil))
		if a.Verb != tc.verb || a.Subresource != tc.sub {
			t.Errorf("%s %s: got %s/%s, want %s/%s", tc.method, tc.path, a.Verb, a.Subresource, tc.verb, tc.sub)
		}
	}
}

func TestServingCert(t *testing.T) {
	dir := t.TempDir()
	c1, err := ServingCert("", "", dir, []string{"node1", "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(c1.Certificate[0])
	if err := leaf.VerifyHostname("127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "kubelet.key")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	c2, err := ServingCert("", "", dir, []string{"node1"})
	if err != nil {
		t.Fatal(err)
	}
	if string(c2.Certificate[0]) != string(c1.Certificate[0]) {
		t.Fatal("a valid self-signed certificate was not reused")
	}
	if _, err := ServingCert(filepath.Join(dir, "kubelet.crt"), "", dir, nil); err == nil {
		t.Fatal("a certificate without its key was accepted")
	}
}

func TestRequireRoot(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: RequireRoot(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})), ConnContext: PeerCredContext}
	go srv.Serve(l)
	defer srv.Close()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return net.Dial("unix", sock)
	}}}
	resp, err := c.Get("http://agent/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := http.StatusOK
	if os.Getuid() != 0 {
		want = http.StatusForbidden
	}
	if resp.StatusCode != want {
		t.Fatalf("status %d, want %d", resp.StatusCode, want)
	}
	rec := httptest.NewRecorder()
	RequireRoot(http.NotFoundHandler()).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != http.StatusForbidden {
		t.Fatalf("request without a unix peer: %d", rec.Code)
	}
}
