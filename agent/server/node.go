package server

import (
	"net/http"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func (s *Server) node(w http.ResponseWriter, r *http.Request) {
	var n *v1.Node
	ok := false
	if s.d.Node != nil {
		n, ok = s.d.Node.Node()
	}
	if !ok {
		http.Error(w, "the node is not known yet", http.StatusNotFound)
		return
	}
	n.TypeMeta = metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}
	writeJSON(w, n)
}

func (s *Server) nodeEvents(w http.ResponseWriter, r *http.Request) {
	list := &v1.EventList{TypeMeta: metav1.TypeMeta{Kind: "EventList", APIVersion: "v1"}}
	if s.d.Node != nil {
		list.Items = s.d.Node.NodeEvents()
	}
	writeJSON(w, list)
}
