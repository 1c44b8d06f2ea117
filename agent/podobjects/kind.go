package podobjects

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
)

// kind is how one kind of object is read from the apiserver.
type kind[T runtime.Object] struct {
	resource  schema.GroupResource
	get       func(ctx context.Context, namespace, name string, opts metav1.GetOptions) (T, error)
	list      func(ctx context.Context, namespace string, opts metav1.ListOptions) (runtime.Object, error)
	watch     func(ctx context.Context, namespace string, opts metav1.ListOptions) (watch.Interface, error)
	immutable func(T) bool
	newObj    func() T
}

// getStore is the Get strategy: every read asks the apiserver.
type getStore[T runtime.Object] struct{ kind[T] }

func (s getStore[T]) get(ctx context.Context, namespace, name string) (T, error) {
	return s.kind.get(ctx, namespace, name, metav1.GetOptions{})
}
func (getStore[T]) addRef(string, string)    {}
func (getStore[T]) deleteRef(string, string) {}
