package cri_test

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/nodelet/nodelet/runtime/cni"
	"github.com/nodelet/nodelet/runtime/errdefs"
	"github.com/nodelet/nodelet/test/harness/runtimetest"
)

// cidrNetwork records the pod CIDRs UpdateRuntimeConfig hands it.
type cidrNetwork struct{ got []string }

func (n *cidrNetwork) SetUpPod(context.Context, cni.PodNetwork) (*cni.Result, error) {
	return &cni.Result{IPs: []string{"10.88.0.9"}}, nil
}
func (n *cidrNetwork) TearDownPod(context.Context, cni.PodNetwork) error { return nil }
func (n *cidrNetwork) Status() error                                     { return nil }
func (n *cidrNetwork) SetPodCIDR(c string) (bool, error) {
	if c == "bad" {
		return false, fmt.Errorf("%w: pod CIDR %q", errdefs.ErrInvalidArgument, c)
	}
	n.got = append(n.got, c)
	return true, nil
}

func TestUpdateRuntimeConfigPodCIDR(t *testing.T) {
	net := &cidrNetwork{}
	e := runtimetest.Start(t, runtimetest.WithNetwork(net))
	update := func(cidr string) error {
		_, err := e.Runtime.UpdateRuntimeConfig(context.Background(), &runtimeapi.UpdateRuntimeConfigRequest{
			RuntimeConfig: &runtimeapi.RuntimeConfig{NetworkConfig: &runtimeapi.NetworkConfig{PodCidr: cidr}}})
		return err
	}
	if err := update("10.244.1.0/24"); err != nil {
		t.Fatal(err)
	}
	if err := update(""); err != nil { // nothing to say: the network is left as it is
		t.Fatal(err)
	}
	if err := update("bad"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a bad CIDR: %v, want InvalidArgument", err)
	}
	if len(net.got) != 1 || net.got[0] != "10.244.1.0/24" {
		t.Fatalf("the network was given %q", net.got)
	}
}
