package csi

import (
	"context"
	"fmt"
	"net"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/nodelet/nodelet/internal/unixsock"
)

// callTimeout bounds each call into a driver, as the kubelet's csiTimeout (2 minutes): staging may
// format a disk.
const callTimeout = 2 * time.Minute

// maxDriverMessage bounds what a driver may send in one answer.
const maxDriverMessage = 4 << 20

// client is a connection to one driver's node service.
type client struct {
	conn *grpc.ClientConn
	node csipb.NodeClient
}

func dial(endpoint string) (*client, error) {
	conn, err := grpc.NewClient("passthrough:///"+endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return unixsock.Dial(ctx, endpoint) }),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxDriverMessage)))
	if err != nil {
		return nil, fmt.Errorf("failed to create CSI client: %w", err)
	}
	return &client{conn: conn, node: csipb.NewNodeClient(conn)}, nil
}

func (c *client) close() { c.conn.Close() }

// capabilities are the node service's RPC capabilities (STAGE_UNSTAGE_VOLUME, GET_VOLUME_STATS,
// VOLUME_MOUNT_GROUP, ...).
func (c *client) capabilities(ctx context.Context) (map[csipb.NodeServiceCapability_RPC_Type]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.node.NodeGetCapabilities(ctx, &csipb.NodeGetCapabilitiesRequest{})
	if err != nil {
		return nil, err
	}
	caps := map[csipb.NodeServiceCapability_RPC_Type]bool{}
	for _, cap := range resp.GetCapabilities() {
		caps[cap.GetRpc().GetType()] = true
	}
	return caps, nil
}

func (c *client) info(ctx context.Context) (*csipb.NodeGetInfoResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return c.node.NodeGetInfo(ctx, &csipb.NodeGetInfoRequest{})
}
