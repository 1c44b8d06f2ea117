package streaming

import (
	"net/http"
	"sync"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	lib "k8s.io/cri-streaming/pkg/streaming"
)

// lazyLib builds the library's server on its first use: a URL handed out or a request served.
// Building it assembles a go-restful container (routes with compiled path expressions) that a
// runtime nobody execs into, attaches to or port-forwards through never needs; the listener, and
// so every URL's address, exists from the start all the same.
type lazyLib struct {
	once  sync.Once
	build func() (lib.Server, error)
	s     lib.Server
	err   error
}

func (l *lazyLib) get() (lib.Server, error) {
	l.once.Do(func() { l.s, l.err = l.build() })
	return l.s, l.err
}

func (l *lazyLib) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s, err := l.get()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.ServeHTTP(w, r)
}

func (l *lazyLib) GetExec(req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	s, err := l.get()
	if err != nil {
		return nil, err
	}
	return s.GetExec(req)
}

func (l *lazyLib) GetAttach(req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	s, err := l.get()
	if err != nil {
		return nil, err
	}
	return s.GetAttach(req)
}

func (l *lazyLib) GetPortForward(req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	s, err := l.get()
	if err != nil {
		return nil, err
	}
	return s.GetPortForward(req)
}
