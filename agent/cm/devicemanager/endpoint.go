package devicemanager

import (
	"context"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodelet/nodelet/internal/unixsock"
)

// callTimeout bounds every call into a plugin: a plugin that hangs must not hold a pod's admission
// or start forever (the kubelet gives Allocate and the others no deadline of their own).
const callTimeout = 30 * time.Second

// maxPluginMessage bounds what a plugin may send in one message: a ListAndWatch answer of 10 000
// devices with topology fits in well under a megabyte.
const maxPluginMessage = 4 << 20

// endpoint is the connection to one registered plugin. An endpoint restored from the checkpoint
// has no connection: its resource is known, its devices are not, until the plugin registers again.
type endpoint struct {
	resource string
	path     string
	conn     *grpc.ClientConn
	client   pluginapi.DevicePluginClient
	opts     *pluginapi.DevicePluginOptions
	// stopped is when the plugin went away (zero while it is connected).
	stopped time.Time
}

// dial connects to the plugin at path and asks its options. The connection is lazy: a plugin
// that is not listening fails the options call, which fails the registration.
func dial(ctx context.Context, resource, path string) (*endpoint, error) {
	conn, err := grpc.NewClient("passthrough:///"+path, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return unixsock.Dial(ctx, path) }),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxPluginMessage)))
	if err != nil {
		return nil, fmt.Errorf("failed to dial device plugin: %w", err)
	}
	e := &endpoint{resource: resource, path: path, conn: conn, client: pluginapi.NewDevicePluginClient(conn)}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	e.opts, err = e.client.GetDevicePluginOptions(cctx, &pluginapi.Empty{})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("failed to get device plugin options: %w", err)
	}
	return e, nil
}

func (e *endpoint) close() {
	if e.conn != nil {
		e.conn.Close()
	}
}

// gracePeriod is how long a gone plugin's resource stays in the Node's capacity (all unhealthy)
// before it is withdrawn: long enough for a plugin being upgraded to come back.
const gracePeriod = 5 * time.Minute

func (e *endpoint) expired(now time.Time) bool {
	return !e.stopped.IsZero() && now.Sub(e.stopped) > gracePeriod
}

func (e *endpoint) allocate(ctx context.Context, ids []string) (*pluginapi.AllocateResponse, error) {
	if e.conn == nil || !e.stopped.IsZero() {
		return nil, fmt.Errorf("endpoint %v has been stopped", e.resource)
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return e.client.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
}

func (e *endpoint) preferred(ctx context.Context, available, mustInclude []string, size int) (*pluginapi.PreferredAllocationResponse, error) {
	if e.conn == nil || !e.stopped.IsZero() {
		return nil, fmt.Errorf("endpoint %v has been stopped", e.resource)
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return e.client.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{
		AvailableDeviceIDs: available, MustIncludeDeviceIDs: mustInclude, AllocationSize: int32(size)}}})
}

func (e *endpoint) preStart(ctx context.Context, ids []string) error {
	if e.conn == nil || !e.stopped.IsZero() {
		return fmt.Errorf("endpoint %v has been stopped", e.resource)
	}
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := e.client.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIds: ids})
	return err
}
