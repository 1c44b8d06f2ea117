package auth

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Attributes are what an authorizer decides on: the kubelet's mapping of an API request to a verb
// on a subresource of the node object.
type Attributes struct {
	User        *User
	Verb        string // get, create, update, patch, delete
	Node        string
	Subresource string // stats, metrics, log, pods, healthz, configz, proxy
	Path        string
}

func (a Attributes) String() string {
	return fmt.Sprintf("user=%s, verb=%s, resource=nodes, subresource=%s", a.User.Name, a.Verb, a.Subresource)
}

// RequestAttributes maps a request the way the kubelet does, so existing RBAC roles such as
// system:kubelet-api-admin grant the same access here.
func RequestAttributes(u *User, node string, r *http.Request) Attributes {
	verb := "get"
	switch r.Method {
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	}
	sub := "proxy"
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/stats"):
		sub = "stats"
	case strings.HasPrefix(p, "/metrics"):
		sub = "metrics"
	case strings.HasPrefix(p, "/logs"):
		sub = "log"
	case p == "/pods" || strings.HasPrefix(p, "/pods/"):
		sub = "pods"
	case p == "/healthz" || strings.HasPrefix(p, "/healthz/"):
		sub = "healthz"
	case p == "/configz":
		sub = "configz"
	}
	return Attributes{User: u, Verb: verb, Node: node, Subresource: sub, Path: p}
}

// Authorizer allows or denies; reason is for the 403 body and logs.
type Authorizer interface {
	Authorize(ctx context.Context, a Attributes) (allowed bool, reason string, err error)
}

// AlwaysAllow is the standalone and "AlwaysAllow" mode: any authenticated user may do anything.
type AlwaysAllow struct{}

func (AlwaysAllow) Authorize(context.Context, Attributes) (bool, string, error) { return true, "", nil }

// SubjectAccessReviewer is client-go's SubjectAccessReviewInterface
// (clientset.AuthorizationV1().SubjectAccessReviews()).
type SubjectAccessReviewer interface {
	Create(ctx context.Context, sar *authzv1.SubjectAccessReview, opts metav1.CreateOptions) (*authzv1.SubjectAccessReview, error)
}

// Webhook asks the apiserver. As in the kubelet, the fine-grained subresources (pods, healthz, configz)
// fall back to "proxy", which older roles grant. Answers are cached (allowed for AllowTTL, denied
// for DenyTTL).
type Webhook struct {
	Reviewer          SubjectAccessReviewer
	AllowTTL, DenyTTL time.Duration

	mu    sync.Mutex
	cache map[string]sarAnswer
}

type sarAnswer struct {
	allowed bool
	reason  string
	expires time.Time
}

func (w *Webhook) Authorize(ctx context.Context, a Attributes) (bool, string, error) {
	ok, reason, err := w.review(ctx, a)
	if err != nil || ok || (a.Subresource != "pods" && a.Subresource != "healthz" && a.Subresource != "configz") {
		return ok, reason, err
	}
	a.Subresource = "proxy"
	return w.review(ctx, a)
}

func (w *Webhook) review(ctx context.Context, a Attributes) (bool, string, error) {
	key := fmt.Sprintf("%s|%s|%v|%s|%s|%s", a.User.Name, a.User.UID, a.User.Groups, a.Verb, a.Node, a.Subresource)
	now := time.Now()
	w.mu.Lock()
	if ans, hit := w.cache[key]; hit && now.Before(ans.expires) {
		w.mu.Unlock()
		return ans.allowed, ans.reason, nil
	}
	w.mu.Unlock()
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range a.User.Extra {
		extra[k] = v
	}
	res, err := w.Reviewer.Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: a.User.Name, UID: a.User.UID, Groups: a.User.Groups, Extra: extra,
		ResourceAttributes: &authzv1.ResourceAttributes{
			Verb: a.Verb, Group: "", Version: "v1", Resource: "nodes", Subresource: a.Subresource, Name: a.Node,
		},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("subject access review: %w", err)
	}
	ans := sarAnswer{allowed: res.Status.Allowed && !res.Status.Denied, reason: res.Status.Reason}
	ttl := w.AllowTTL
	if ttl <= 0 {
		ttl = 5 * time.Minute
	}
	if !ans.allowed {
		ttl = w.DenyTTL
		if ttl <= 0 {
			ttl = 30 * time.Second
		}
	}
	ans.expires = now.Add(ttl)
	w.mu.Lock()
	if w.cache == nil || len(w.cache) > 4096 {
		w.cache = map[string]sarAnswer{}
	}
	w.cache[key] = ans
	w.mu.Unlock()
	return ans.allowed, ans.reason, nil
}

// Filter guards an API served over TCP.
type Filter struct {
	Authn Authenticator
	Authz Authorizer
	// AllowAnonymous lets requests without credentials through as Anonymous (authorization still
	// applies). Off by default, like the kubelet's config file.
	AllowAnonymous bool
	Node           string
}

type userKey struct{}

// UserFrom returns the user Filter authenticated, if any.
func UserFrom(ctx context.Context) (*User, bool) {
	u, ok := ctx.Value(userKey{}).(*User)
	return u, ok
}

// Wrap answers 401 to requests without acceptable credentials and 403 to those the authorizer
// denies, before next sees them.
func (f *Filter) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, ok, err := f.Authn.Authenticate(r)
		if err != nil {
			slog.Debug("agent API authentication failed", "remote", r.RemoteAddr, "err", err)
		}
		if !ok {
			if !f.AllowAnonymous {
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
			u = Anonymous
		}
		attrs := RequestAttributes(u, f.Node, r)
		allowed, reason, err := f.Authz.Authorize(r.Context(), attrs)
		if err != nil {
			slog.Warn("agent API authorization failed", "attrs", attrs.String(), "err", err)
			http.Error(w, fmt.Sprintf("Authorization error (%s)", attrs), http.StatusInternalServerError)
			return
		}
		if !allowed {
			msg := fmt.Sprintf("Forbidden (%s)", attrs)
			if reason != "" {
				msg += ": " + reason
			}
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
	})
}
