package admission

import (
	"context"
	goruntime "runtime"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
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
	name    string
	factory informers.SharedInformerFactory
	lister  corelisters.NodeLister
}

// NewNodeLister watches the Node called name through client; nothing is read until Run.
func NewNodeLister(client kubernetes.Interface, name string) *NodeLister {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}))
	nodes := f.Core().V1().Nodes()
	nodes.Informer() // registers the informer, so Start starts it
	return &NodeLister{name: name, factory: f, lister: nodes.Lister()}
}

// Run watches the Node until ctx ends.
func (l *NodeLister) Run(ctx context.Context) {
	l.factory.Start(ctx.Done())
	<-ctx.Done()
	l.factory.Shutdown()
}

// Get returns the Node as last seen; an error until it has been read (or while it does not exist).
func (l *NodeLister) Get() (*v1.Node, error) { return l.lister.Get(l.name) }

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
