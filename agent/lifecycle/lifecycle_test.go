package lifecycle

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type fakeExec struct {
	exit  int32
	err   error
	calls [][]string
}

func (f *fakeExec) ExecSync(_ context.Context, in *runtimeapi.ExecSyncRequest, _ ...grpc.CallOption) (*runtimeapi.ExecSyncResponse, error) {
	f.calls = append(f.calls, in.Cmd)
	if f.err != nil {
		return nil, f.err
	}
	return &runtimeapi.ExecSyncResponse{ExitCode: f.exit, Stderr: []byte("boom")}, nil
}

func TestRun(t *testing.T) {
	var gotHeader, gotHost, gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHeader, gotHost, gotPath = r.Header.Get("X-Hook"), r.Host, r.URL.Path
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	host, portStr, _ := net.SplitHostPort(srv.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)
	c := &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}

	cases := []struct {
		name    string
		exec    fakeExec
		h       *v1.LifecycleHandler
		wantErr bool
		check   func(t *testing.T)
	}{
		{name: "exec ok", h: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"touch", "/x"}}}},
		{name: "exec exit code", exec: fakeExec{exit: 3}, h: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"false"}}}, wantErr: true},
		{name: "exec rpc error", exec: fakeExec{err: errors.New("gone")}, h: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"x"}}}, wantErr: true},
		{name: "http by named port with headers", h: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "hook", Port: intstr.FromString("http"),
			HTTPHeaders: []v1.HTTPHeader{{Name: "X-Hook", Value: "yes"}, {Name: "Host", Value: "example"}}}},
			check: func(t *testing.T) {
				if gotHeader != "yes" || gotHost != "example" || gotPath != "/hook" {
					t.Fatalf("request header %q host %q path %q", gotHeader, gotHost, gotPath)
				}
			}},
		{name: "http by number", h: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(int32(port))}}},
		{name: "http status 500", h: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/fail", Port: intstr.FromInt32(int32(port))}}, wantErr: true},
		{name: "http unknown port name", h: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromString("nope")}}, wantErr: true},
		{name: "sleep", h: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 0}}},
		{name: "tcpSocket refused", h: &v1.LifecycleHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(1)}}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ex := tc.exec
			r := &Runner{Exec: &ex}
			err := r.Run(context.Background(), Target{ContainerID: "c1", Container: c, PodIP: host}, tc.h)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrHook) {
				t.Fatalf("%v is not ErrHook", err)
			}
			if tc.check != nil {
				tc.check(t)
			}
		})
	}
}

// A preStop sleep longer than the grace period ends with the period, without an error.
func TestSleepCutByGracePeriod(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := &Runner{}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, Target{}, &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 3600}}) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute): // guards a hang only
		t.Fatal("sleep hook ignored its context")
	}
}
