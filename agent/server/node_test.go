package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/agent/server"
	"github.com/nodelet/nodelet/test/harness/apitest"
)

type fakeNode struct {
	node   *v1.Node
	events []v1.Event
}

func (f *fakeNode) Node() (*v1.Node, bool) {
	if f.node == nil {
		return nil, false
	}
	return f.node.DeepCopy(), true
}

func (f *fakeNode) NodeEvents() []v1.Event { return f.events }

func TestNode(t *testing.T) {
	f := apitest.NewFixture(t)
	src := &fakeNode{events: []v1.Event{{Reason: "Starting", Message: "Starting kubelet."}}}
	srv := server.New(server.Deps{NodeName: "node1", Pods: f.Pods, Runtime: f.Runtime, Node: src})
	get := func(path string, out any) int {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code == http.StatusOK {
			if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
		return rec.Code
	}
	var n v1.Node
	if code := get("/node", &n); code != http.StatusNotFound {
		t.Fatalf("/node before the node is built: %d", code)
	}
	src.node = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}}
	if code := get("/node", &n); code != http.StatusOK || n.Name != "node1" || n.Kind != "Node" {
		t.Fatalf("/node: %d %+v", code, n)
	}
	var evs v1.EventList
	if code := get("/node/events", &evs); code != http.StatusOK || len(evs.Items) != 1 || evs.Items[0].Reason != "Starting" {
		t.Fatalf("/node/events: %d %+v", code, evs)
	}
	// Without a node source (an older embedding), the node is simply not there.
	bare := server.New(server.Deps{NodeName: "node1", Pods: f.Pods, Runtime: f.Runtime})
	rec := httptest.NewRecorder()
	bare.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/node", nil))
	if rec.Code != http.StatusNotFound {
		t.Fatalf("/node without a source: %d", rec.Code)
	}
}
