package kuberuntime

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodelet/nodelet/agent/kubeclient"
)

// APIRuntimeClasses reads RuntimeClass objects from the apiserver.
type APIRuntimeClasses struct {
	Client interface {
		RuntimeClasses() kubeclient.RuntimeClassInterface
	}
}

// Handler returns the RuntimeClass's handler.
func (r APIRuntimeClasses) Handler(ctx context.Context, name string) (string, error) {
	rc, err := r.Client.RuntimeClasses().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return rc.Handler, nil
}
