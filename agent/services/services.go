// Package services keeps the cluster's Services in memory for the docker-link style environment
// variables every container gets (KUBERNETES_SERVICE_HOST and friends), as the kubelet's service
// informer does. Only Services with a cluster IP are listed: headless ones give no variables, and
// leaving them out keeps large clusters' watches smaller.
package services

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/nodelet/nodelet/agent/kubeclient"
)

// Client is the apiserver as the lister reads it (a *kubeclient.Client is one).
type Client interface {
	Services(namespace string) kubeclient.ServiceInterface
}

// Lister serves Services from an informer's cache.
type Lister struct {
	informer cache.SharedIndexInformer
}

// New makes a lister of client's Services; nothing is read until Run.
func New(client Client) *Lister {
	selector := fields.OneTermNotEqualSelector("spec.clusterIP", v1.ClusterIPNone).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return client.Services(metav1.NamespaceAll).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return client.Services(metav1.NamespaceAll).Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), &v1.Service{}, 0, cache.Indexers{})
	return &Lister{informer: inf}
}

// Run watches Services until ctx ends.
func (l *Lister) Run(ctx context.Context) { l.informer.RunWithContext(ctx) }

// HasSynced reports whether the first list has arrived; until then List may miss Services.
func (l *Lister) HasSynced() bool { return l.informer.HasSynced() }

// List returns every Service in the cache, of all namespaces.
func (l *Lister) List() ([]*v1.Service, error) {
	var out []*v1.Service
	err := cache.ListAll(l.informer.GetStore(), labels.Everything(), func(o any) {
		out = append(out, o.(*v1.Service))
	})
	return out, err
}
