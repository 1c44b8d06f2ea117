package podsource

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/nodelet/nodelet/agent/kubeclient"
)

// PodClient is the apiserver as the pod source reads it (a *kubeclient.Client is one).
type PodClient interface {
	Pods(namespace string) kubeclient.PodInterface
}

// APISource watches the pods bound to this node (field selector spec.nodeName) and hands the
// whole set over on every change, as the kubelet's reflector into an UndeltaStore does.
type APISource struct {
	Client   PodClient
	NodeName string
	Set      func(source string, pods []*v1.Pod)
}

// Run watches until ctx ends.
func (s *APISource) Run(ctx context.Context) error {
	selector := fields.OneTermEqualSelector("spec.nodeName", s.NodeName).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return s.Client.Pods(metav1.NamespaceAll).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return s.Client.Pods(metav1.NamespaceAll).Watch(ctx, o)
		},
	}
	push := func(objs []any) {
		pods := make([]*v1.Pod, 0, len(objs))
		for _, o := range objs {
			if p, ok := o.(*v1.Pod); ok && p.Spec.NodeName == s.NodeName {
				p = p.DeepCopy()
				if p.Annotations == nil {
					p.Annotations = map[string]string{}
				}
				if p.Annotations[ConfigMirrorAnnotation] == "" {
					p.Annotations[ConfigSourceAnnotation] = ApiserverSource
				}
				pods = append(pods, p)
			}
		}
		s.Set(ApiserverSource, pods)
	}
	store := cache.NewUndeltaStore(push, cache.MetaNamespaceKeyFunc)
	// The fake clientset of tests cannot stream a watch-list; the wrapper lets the reflector know.
	r := cache.NewReflector(cache.ToListWatcherWithWatchListSemantics(lw, s.Client), &v1.Pod{}, store, 0)
	r.RunWithContext(ctx)
	return nil
}
