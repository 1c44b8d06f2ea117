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
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// Lister serves Services from an informer's cache.
type Lister struct {
	factory informers.SharedInformerFactory
	lister  corelisters.ServiceLister
	synced  cache.InformerSynced
}

// New makes a lister of client's Services; nothing is read until Run.
func New(client kubernetes.Interface) *Lister {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermNotEqualSelector("spec.clusterIP", v1.ClusterIPNone).String()
	}))
	svc := f.Core().V1().Services()
	// Asking for the informer here registers it, so Start below starts it.
	synced := svc.Informer().HasSynced
	return &Lister{factory: f, lister: svc.Lister(), synced: synced}
}

// Run watches Services until ctx ends.
func (l *Lister) Run(ctx context.Context) {
	l.factory.Start(ctx.Done())
	<-ctx.Done()
	l.factory.Shutdown()
}

// HasSynced reports whether the first list has arrived; until then List may miss Services.
func (l *Lister) HasSynced() bool { return l.synced() }

// List returns every Service in the cache, of all namespaces.
func (l *Lister) List() ([]*v1.Service, error) {
	return l.lister.List(labels.Everything())
}
