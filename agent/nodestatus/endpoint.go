package nodestatus

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodelet/nodelet/agent/kubeclient"
)

// PublishDaemonEndpoint writes the agent API's port into the Node's status.daemonEndpoints, which
// the apiserver dials (at one of status.addresses) for logs, exec, attach, port-forward and the
// node proxy. The part that serves the API knows the port, so it publishes it: it waits for the
// Node to be registered, patches once, and returns. The status manager's updates read the Node
// before writing it, so they keep the field.
func PublishDaemonEndpoint(ctx context.Context, client interface {
	Nodes() kubeclient.NodeInterface
}, node string, port int32, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	patch := []byte(fmt.Sprintf(`{"status":{"daemonEndpoints":{"kubeletEndpoint":{"Port":%d}}}}`, port))
	wait := 200 * time.Millisecond
	for {
		_, err := client.Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			log.Warn("publish the agent API's port in the node status", "node", node, "err", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}
