package runtimetest

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ForwardGet fetches path from port of the pod through a CRI port-forward session, as kubectl
// port-forward would, and returns the status code and body. A refused connection ends the
// session, so call it once the server listens.
func (e *Env) ForwardGet(sandboxID string, port int32, path string) (int, string) {
	e.t.Helper()
	resp, err := e.Runtime.PortForward(e.Ctx(), &runtimeapi.PortForwardRequest{PodSandboxId: sandboxID, Port: []int32{port}})
	if err != nil {
		e.t.Fatal(err)
	}
	u, err := url.Parse(resp.Url)
	if err != nil {
		e.t.Fatal(err)
	}
	tr, upgrader, err := spdy.RoundTripperFor(&rest.Config{})
	if err != nil {
		e.t.Fatal(err)
	}
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(spdy.NewDialer(upgrader, &http.Client{Transport: tr}, "POST", u),
		[]string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		e.t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- pf.ForwardPorts() }()
	defer func() { close(stop); <-errc }()
	<-ready
	ports, err := pf.GetPorts()
	if err != nil {
		e.t.Fatal(err)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	r, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d%s", ports[0].Local, path))
	if err != nil {
		e.t.Fatalf("GET through the forwarded port: %v", err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		e.t.Fatalf("GET through the forwarded port: %v", err)
	}
	return r.StatusCode, string(b)
}
