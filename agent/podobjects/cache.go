package podobjects

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// cacheStore is the Cache strategy: an object is fetched when read and kept for the TTL.
type cacheStore[T runtime.Object] struct {
	kind[T]
	ttl func() time.Duration
	now func() time.Time

	mu    sync.Mutex
	items map[objectKey]*cacheItem[T]
}

type objectKey struct{ namespace, name string }

type cacheItem[T runtime.Object] struct {
	refs int

	mu      sync.Mutex // held across a fetch, so concurrent reads of one object fetch once
	fetched bool       // object and err hold a fetch's result
	object  T
	err     error
	at      time.Time
}

func newCacheStore[T runtime.Object](k kind[T], ttl func() time.Duration, now func() time.Time) *cacheStore[T] {
	return &cacheStore[T]{kind: k, ttl: ttl, now: now, items: map[objectKey]*cacheItem[T]{}}
}

func (s *cacheStore[T]) addRef(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := objectKey{namespace, name}
	it := s.items[k]
	if it == nil {
		it = &cacheItem[T]{}
		s.items[k] = it
	}
	it.refs++
	// A pod registering gets data fresh from the apiserver at its next read.
	it.mu.Lock()
	it.fetched = false
	it.mu.Unlock()
}

func (s *cacheStore[T]) deleteRef(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := objectKey{namespace, name}
	if it := s.items[k]; it != nil {
		if it.refs--; it.refs <= 0 {
			delete(s.items, k)
		}
	}
}

func (s *cacheStore[T]) get(ctx context.Context, namespace, name string) (T, error) {
	s.mu.Lock()
	it := s.items[objectKey{namespace, name}]
	s.mu.Unlock()
	if it == nil {
		var zero T
		return zero, notRegistered(namespace, name)
	}
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.fetched && it.err == nil && s.now().Before(it.at.Add(s.ttl())) {
		return it.object, nil
	}
	opts := metav1.GetOptions{}
	if it.fetched && it.err == nil {
		// A refresh may be served from the apiserver's watch cache, as the kubelet asks.
		opts.ResourceVersion = "0"
	}
	obj, err := s.kind.get(ctx, namespace, name, opts)
	if err != nil && !apierrors.IsNotFound(err) {
		if it.fetched && it.err == nil {
			// The apiserver is unreachable: the object as last read still stands.
			return it.object, nil
		}
		return obj, err
	}
	it.fetched, it.object, it.err, it.at = true, obj, err, s.now()
	return obj, err
}
