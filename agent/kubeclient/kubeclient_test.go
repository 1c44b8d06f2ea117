package kubeclient

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

type request struct {
	method, path, query, contentType string
	body                             map[string]any
}

// apiserver records requests and answers each with reply (a JSON object) or 404.
func apiserver(t *testing.T, reply func(r request) (int, any)) (*Client, func() []request) {
	t.Helper()
	var mu sync.Mutex
	var seen []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		req := request{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, contentType: r.Header.Get("Content-Type")}
		if len(b) > 0 {
			if err := json.Unmarshal(b, &req.body); err != nil {
				t.Errorf("%s %s: body not JSON: %q", r.Method, r.URL.Path, b)
			}
		}
		mu.Lock()
		seen = append(seen, req)
		mu.Unlock()
		code, obj := reply(req)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(obj)
	}))
	t.Cleanup(srv.Close)
	c, err := New(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c, func() []request { mu.Lock(); defer mu.Unlock(); return append([]request(nil), seen...) }
}

func TestRequestsFollowTheAPIConventions(t *testing.T) {
	c, seen := apiserver(t, func(r request) (int, any) {
		switch {
		case strings.HasSuffix(r.path, "/missing"):
			return 404, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Failure",
				Reason: metav1.StatusReasonNotFound, Code: 404}
		case strings.Contains(r.path, "/leases"):
			return 200, &coordinationv1.Lease{TypeMeta: metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"},
				ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
		case strings.HasSuffix(r.path, "/token"):
			return 201, &authnv1.TokenRequest{TypeMeta: metav1.TypeMeta{Kind: "TokenRequest", APIVersion: "authentication.k8s.io/v1"},
				Status: authnv1.TokenRequestStatus{Token: "t0k"}}
		case strings.Contains(r.path, "/pods") && r.method == "GET" && !strings.Contains(r.path, "/pods/"):
			return 200, &v1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: []v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}}
		}
		return 200, &v1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	})
	ctx := context.Background()

	if _, err := c.Pods("ns").Patch(ctx, "p", types.MergePatchType, []byte(`{"status":{}}`), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	uid := types.UID("u1")
	if err := c.Pods("ns").Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
		t.Fatal(err)
	}
	list, err := c.Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n1"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list: %v %v", list, err)
	}
	if _, err := c.Nodes().UpdateStatus(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := c.ServiceAccounts("ns").CreateToken(ctx, "default", &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil || tr.Status.Token != "t0k" {
		t.Fatalf("token: %v %v", tr, err)
	}
	if _, err := c.Secrets("ns").Get(ctx, "missing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a missing secret: %v, want NotFound", err)
	}

	want := []struct{ method, path, query, kind, apiVersion string }{
		{"PATCH", "/api/v1/namespaces/ns/pods/p/status", "", "", ""},
		{"DELETE", "/api/v1/namespaces/ns/pods/p", "", "DeleteOptions", "v1"},
		{"GET", "/api/v1/pods", "fieldSelector=spec.nodeName%3Dn1", "", ""},
		{"PUT", "/api/v1/nodes/n1/status", "", "Node", "v1"},
		{"POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", "", "Lease", "coordination.k8s.io/v1"},
		{"POST", "/api/v1/namespaces/ns/serviceaccounts/default/token", "", "TokenRequest", "authentication.k8s.io/v1"},
		{"GET", "/api/v1/namespaces/ns/secrets/missing", "", "", ""},
	}
	got := seen()
	if len(got) != len(want) {
		t.Fatalf("%d requests, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.method != w.method || g.path != w.path || g.query != w.query {
			t.Errorf("request %d: %s %s?%s, want %s %s?%s", i, g.method, g.path, g.query, w.method, w.path, w.query)
		}
		if w.kind != "" && (g.body["kind"] != w.kind || g.body["apiVersion"] != w.apiVersion) {
			t.Errorf("request %d: body kind %v %v, want %s %s", i, g.body["kind"], g.body["apiVersion"], w.kind, w.apiVersion)
		}
	}
	if got[0].contentType != string(types.MergePatchType) {
		t.Errorf("patch content type %q", got[0].contentType)
	}
	if pre, _ := got[1].body["preconditions"].(map[string]any); pre["uid"] != "u1" || got[1].body["gracePeriodSeconds"] != float64(0) {
		t.Errorf("delete options %v", got[1].body)
	}
}
