// Package auth authenticates and authorizes requests to the agent's HTTP API as the kubelet does:
// x509 client certificates against a client CA, bearer tokens through a TokenReview, and
// authorization through a SubjectAccessReview on the node's subresources. It also makes the
// self-signed serving certificate and checks that a unix-socket peer is root.
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// User is who made a request.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string][]string
}

// Anonymous is the user of a request without credentials, when anonymous requests are allowed.
var Anonymous = &User{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}

// Authenticator finds the user of a request. ok is false when the request carries no credentials
// this authenticator understands (or they do not check out): the next one may try.
type Authenticator interface {
	Authenticate(r *http.Request) (u *User, ok bool, err error)
}

// X509 accepts a TLS client certificate that chains to Roots and allows client authentication.
// The user is its common name, the groups its organizations (as the apiserver does). The listener
// asks for certificates without checking them, so a bad one means "not authenticated", not a
// failed handshake.
type X509 struct {
	Roots *x509.CertPool
}

func (a X509) Authenticate(r *http.Request) (*User, bool, error) {
	if a.Roots == nil || r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return nil, false, nil
	}
	leaf := r.TLS.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots: a.Roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return nil, false, fmt.Errorf("client certificate %q: %w", leaf.Subject.CommonName, err)
	}
	if leaf.Subject.CommonName == "" {
		return nil, false, errors.New("client certificate without a common name")
	}
	return &User{Name: leaf.Subject.CommonName, Groups: leaf.Subject.Organization}, true, nil
}

// TokenReviewer is client-go's TokenReviewInterface (clientset.AuthenticationV1().TokenReviews()).
type TokenReviewer interface {
	Create(ctx context.Context, tr *authnv1.TokenReview, opts metav1.CreateOptions) (*authnv1.TokenReview, error)
}

// Token checks "Authorization: Bearer" tokens with the apiserver. Answers are cached for TTL so
// a `kubectl logs -f` burst does not become a TokenReview storm.
type Token struct {
	Reviewer  TokenReviewer
	Audiences []string
	TTL       time.Duration

	mu    sync.Mutex
	cache map[[32]byte]tokenAnswer
}

type tokenAnswer struct {
	user    *User
	ok      bool
	expires time.Time
}

func (a *Token) Authenticate(r *http.Request) (*User, bool, error) {
	h := r.Header.Get("Authorization")
	if a.Reviewer == nil || !strings.HasPrefix(h, "Bearer ") {
		return nil, false, nil
	}
	tok := strings.TrimSpace(strings.TrimPrefix(h, "Bearer "))
	if tok == "" {
		return nil, false, nil
	}
	key := sha256.Sum256([]byte(tok))
	now := time.Now()
	a.mu.Lock()
	if ans, hit := a.cache[key]; hit && now.Before(ans.expires) {
		a.mu.Unlock()
		return ans.user, ans.ok, nil
	}
	a.mu.Unlock()
	res, err := a.Reviewer.Create(r.Context(), &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: tok, Audiences: a.Audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, false, fmt.Errorf("token review: %w", err)
	}
	ans := tokenAnswer{ok: res.Status.Authenticated}
	if ans.ok {
		ui := res.Status.User
		extra := map[string][]string{}
		for k, v := range ui.Extra {
			extra[k] = v
		}
		ans.user = &User{Name: ui.Username, UID: ui.UID, Groups: ui.Groups, Extra: extra}
	}
	ttl := a.TTL
	if ttl <= 0 {
		ttl = 2 * time.Minute
	}
	ans.expires = now.Add(ttl)
	a.mu.Lock()
	if a.cache == nil {
		a.cache = map[[32]byte]tokenAnswer{}
	}
	if len(a.cache) > 4096 {
		clear(a.cache)
	}
	a.cache[key] = ans
	a.mu.Unlock()
	return ans.user, ans.ok, nil
}

// Union tries each authenticator in turn; the first that recognizes the request wins.
type Union []Authenticator

func (u Union) Authenticate(r *http.Request) (*User, bool, error) {
	var errs []error
	for _, a := range u {
		user, ok, err := a.Authenticate(r)
		if ok {
			return user, true, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return nil, false, errors.Join(errs...)
}
