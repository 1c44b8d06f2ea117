package kuberuntime

import (
	"context"
	"fmt"
	"time"

	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/nodelet/nodelet/agent/kubeclient"
)

// firstListWait bounds how long a lookup waits for the first list of RuntimeClasses, so a pod
// started right after the agent does not fail for want of it, and an apiserver that never
// answers fails the sandbox rather than holding its worker.
const firstListWait = 5 * time.Second

// RuntimeClassClient is the apiserver as APIRuntimeClasses reads it (a *kubeclient.Client is one).
type RuntimeClassClient interface {
	RuntimeClasses() kubeclient.RuntimeClassInterface
}

// APIRuntimeClasses serves the apiserver's RuntimeClasses from a watch of them all, as the
// kubelet's runtime class manager does from its informer: no request per sandbox.
type APIRuntimeClasses struct {
	informer cache.SharedIndexInformer
}

// NewAPIRuntimeClasses watches client's RuntimeClasses once Run starts.
func NewAPIRuntimeClasses(client RuntimeClassClient) *APIRuntimeClasses {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.RuntimeClasses().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.RuntimeClasses().Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), &nodev1.RuntimeClass{}, 0, cache.Indexers{})
	return &APIRuntimeClasses{informer: inf}
}

// Run watches RuntimeClasses until ctx ends.
func (r *APIRuntimeClasses) Run(ctx context.Context) { r.informer.RunWithContext(ctx) }

// Handler returns the RuntimeClass's handler; a RuntimeClass the apiserver lacks is the
// kubelet's NotFound error.
func (r *APIRuntimeClasses) Handler(ctx context.Context, name string) (string, error) {
	wctx, cancel := context.WithTimeout(ctx, firstListWait)
	defer cancel()
	if !cache.WaitForCacheSync(wctx.Done(), r.informer.HasSynced) {
		return "", fmt.Errorf("failed to lookup RuntimeClass %s: the RuntimeClasses have not been listed yet", name)
	}
	o, ok, err := r.informer.GetStore().GetByKey(name)
	if err != nil {
		return "", fmt.Errorf("failed to lookup RuntimeClass %s: %w", name, err)
	}
	if !ok {
		return "", apierrors.NewNotFound(nodev1.Resource("runtimeclass"), name)
	}
	return o.(*nodev1.RuntimeClass).Handler, nil
}
