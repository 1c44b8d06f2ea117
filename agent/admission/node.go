package admission

import (
	"context"
	goruntime "runtime"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/nodelet/nodelet/agent/kubeclient"
)

// LocalNode is the Node as this agent registers it: the well-known labels of this machine, the
// --node-labels, and the --register-with-taints. Standalone it is the only Node there is; in a
// cluster it stands in until the registered Node has been read.
func LocalNode(name string, labels map[string]string, taints []v1.Taint) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		v1.LabelHostname:          name,
		v1.LabelOSStable:          goruntime.GOOS,
		v1.LabelArchStable:        goruntime.GOARCH,
		"beta.kubernetes.io/os":   goruntime.GOOS,
		"beta.kubernetes.io/arch": goruntime.GOARCH,
	}}}
	for k, v := range labels {
		n.Labels[k] = v
	}
	n.Spec.Taints = append([]v1.Taint(nil), taints...)
	return n
}

// NodeLister serves the agent's own Node from a watch limited to it, so that labels and taints an
// administrator changes after registration decide admission without a request per pod.
type NodeLister struct {
	name     string
	informer cache.SharedIndexInformer
}

// NodeClient is the apiserver as the lister reads it (a *kubeclient.Client is one).
type NodeClient interface {
	Nodes() kubeclient.NodeInterface
}

// NewNodeLister watches the Node called name through client; nothing is read until Run.
func NewNodeLister(client NodeClient, name string) *NodeLister {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return client.Nodes().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return client.Nodes().Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), &v1.Node{}, 0, cache.Indexers{})
	return &NodeLister{name: name, informer: inf}
}

// Run watches the Node until ctx ends.
func (l *NodeLister) Run(ctx context.Context) { l.informer.RunWithContext(ctx) }

// Get returns the Node as last seen; an error until it has been read (or while it does not exist).
func (l *NodeLister) Get() (*v1.Node, error) {
	o, ok, err := l.informer.GetStore().GetByKey(l.name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, apierrors.NewNotFound(v1.Resource("node"), l.name)
	}
	return o.(*v1.Node), nil
}

// AnyWay returns get's Node, or fallback when get has none: a pod must not be refused only because
// the agent has not seen its own Node yet (the kubelet's getNodeAnyWay).
func AnyWay(get NodeFunc, fallback *v1.Node) NodeFunc {
	return func() (*v1.Node, error) {
		if get != nil {
			if n, err := get(); err == nil && n != nil {
				return n, nil
			}
		}
		return fallback, nil
	}
}
