package cri_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/cni"
	"github.com/nodelet/nodelet/runtime/engine"
	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// stuckNetwork is a CNI ADD that hangs until its context ends, as a wedged plugin under libcni
// does (libcni kills the plugin when the context ends).
type stuckNetwork struct {
	hang atomic.Bool
	dels atomic.Int32
}

func (n *stuckNetwork) SetUpPod(ctx context.Context, pod cni.PodNetwork) (*cni.Result, error) {
	if n.hang.Load() {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &cni.Result{IPs: []string{"10.88.0.9"}}, nil
}
func (n *stuckNetwork) TearDownPod(ctx context.Context, pod cni.PodNetwork) error {
	n.dels.Add(1)
	return nil
}
func (n *stuckNetwork) Status() error { return nil }

// A RunPodSandbox whose client set no deadline and whose network never comes up ends at the
// server's bound, undoes the sandbox (DEL included) and frees the name for the retry.
func TestRunPodSandboxDeadline(t *testing.T) {
	net := &stuckNetwork{}
	net.hang.Store(true)
	e := runtimetest.Start(t, runtimetest.WithNetwork(net), runtimetest.WithConfig(func(c *engine.Config) { c.CreateTimeout = 5 * time.Second }))
	cfg := runtimetest.PodConfig("stuck-net")
	done := make(chan error, 1)
	go func() {
		_, err := e.Runtime.RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{Config: cfg})
		done <- err
	}()
	select {
	case err := <-done:
		if status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("RunPodSandbox past the server's deadline = %v, want DeadlineExceeded", err)
		}
	case <-time.After(time.Minute): // far past the server's bound: a regression, not a slow machine
		t.Fatal("RunPodSandbox with a hung network never returned")
	}
	if n := net.dels.Load(); n != 1 {
		t.Errorf("DELs after the abandoned ADD: %d, want 1", n)
	}
	if got := readyState(t, e); len(got) != 0 {
		t.Errorf("the abandoned sandbox is listed: %v", got)
	}
	net.hang.Store(false)
	e.RunPod(cfg, "")
}
