package kuberuntime

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/nodelet/nodelet/agent/metrics"
)

// maxCRIMessage is the largest CRI answer the agent accepts, as the kubelet's 16 MiB: a
// ListContainers of a node full of pods fits, a runaway runtime does not exhaust memory.
const maxCRIMessage = 16 << 20

// Dial makes the agent's one CRI connection. Every call through it is timed for the
// runtime-operation metrics and bounded by --runtime-request-timeout, whatever runtime answers
// (nodelet's own in `nodelet up`, or containerd's, CRI-O's).
func Dial(endpoint string, timeout time.Duration) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient(endpoint,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(timeoutInterceptor(timeout), metrics.UnaryClientInterceptor()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxCRIMessage)))
	if err != nil {
		return nil, fmt.Errorf("container runtime endpoint %s: %w", endpoint, err)
	}
	return conn, nil
}

// timeoutInterceptor bounds every CRI call except pulls, as the kubelet's --runtime-request-timeout
// does; a hung runtime then fails a sync instead of freezing a worker. (Streams, such as the event
// stream, are not unary calls and are not bounded.)
func timeoutInterceptor(d time.Duration) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if d > 0 && method != "/runtime.v1.ImageService/PullImage" {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}
