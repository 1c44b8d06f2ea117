package podobjects

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// syncWait is how long a read waits for its object's first list, as the kubelet's.
const syncWait = time.Second

// watchStore is the Watch strategy: one list-and-watch per referenced object.
type watchStore[T runtime.Object] struct {
	kind[T]
	maxIdle time.Duration
	now     func() time.Time
	log     *slog.Logger
	// client tells the reflector whether the apiserver streams a watch-list.
	client any

	mu    sync.Mutex
	items map[objectKey]*watchItem
}

type watchItem struct {
	refs int
	lw   cache.ListerWatcher
	obj  runtime.Object // the kind's empty object, for the reflector

	mu         sync.Mutex
	store      *syncedStore       // of the last start
	cancel     context.CancelFunc // nil: not watching
	immutable  bool               // read once as immutable: never watched again
	lastAccess time.Time
}

func newWatchStore[T runtime.Object](k kind[T], client any, maxIdle time.Duration, now func() time.Time, log *slog.Logger) *watchStore[T] {
	return &watchStore[T]{kind: k, client: client, maxIdle: maxIdle, now: now, log: log, items: map[objectKey]*watchItem{}}
}

func (s *watchStore[T]) addRef(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := objectKey{namespace, name}
	it := s.items[k]
	if it == nil {
		it = s.newItem(namespace, name)
		s.items[k] = it
		it.mu.Lock()
		it.lastAccess = s.now()
		s.start(it)
		it.mu.Unlock()
	}
	it.refs++
}

func (s *watchStore[T]) deleteRef(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := objectKey{namespace, name}
	it := s.items[k]
	if it == nil {
		return
	}
	if it.refs--; it.refs <= 0 {
		delete(s.items, k)
		it.mu.Lock()
		it.stop()
		it.mu.Unlock()
	}
}

// newItem makes the list-and-watch of one object: a field selector on its name, in its namespace.
func (s *watchStore[T]) newItem(namespace, name string) *watchItem {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return s.kind.list(ctx, namespace, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return s.kind.watch(ctx, namespace, o)
		},
	}
	return &watchItem{lw: cache.ToListWatcherWithWatchListSemantics(lw, s.client), obj: s.kind.newObj()}
}

// start runs the item's reflector; it.mu is held.
func (s *watchStore[T]) start(it *watchItem) {
	if it.cancel != nil || it.immutable {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	it.cancel = cancel
	// A store of its own per start: reads wait for this watch's list, and a stopped reflector
	// still finishing a list cannot mark it synced.
	it.store = newSyncedStore()
	r := cache.NewReflectorWithOptions(it.lw, it.obj, it.store, cache.ReflectorOptions{})
	go r.RunWithContext(ctx)
}

// stop ends the item's reflector; it.mu is held.
func (it *watchItem) stop() bool {
	if it.cancel == nil {
		return false
	}
	it.cancel()
	it.cancel = nil
	return true
}

func (s *watchStore[T]) get(ctx context.Context, namespace, name string) (T, error) {
	var zero T
	s.mu.Lock()
	it := s.items[objectKey{namespace, name}]
	s.mu.Unlock()
	if it == nil {
		return zero, notRegistered(namespace, name)
	}
	it.mu.Lock()
	it.lastAccess = s.now()
	s.start(it) // a watch stopped while idle starts again
	store := it.store
	it.mu.Unlock()

	wctx, cancel := context.WithTimeout(ctx, syncWait)
	defer cancel()
	if !store.waitSynced(wctx) {
		return zero, fmt.Errorf("failed to sync %s cache: timed out waiting for the condition", s.resource.String())
	}
	o, ok, err := store.GetByKey(namespace + "/" + name)
	if err != nil {
		return zero, err
	}
	if !ok {
		return zero, apierrors.NewNotFound(s.resource, name)
	}
	obj := o.(T)
	if s.immutable(obj) {
		it.mu.Lock()
		it.immutable = true
		if it.stop() {
			s.log.Debug("stopped watching an immutable object", "resource", s.resource.String(), "namespace", namespace, "name", name)
		}
		it.mu.Unlock()
	}
	return obj, nil
}

// stopIdle stops the watches no read used since now-maxIdle; the next read starts them again.
func (s *watchStore[T]) stopIdle(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range s.items {
		it.mu.Lock()
		if now.Sub(it.lastAccess) >= s.maxIdle {
			it.stop()
		}
		it.mu.Unlock()
	}
}

// stopAll stops every watch, for the agent's end.
func (s *watchStore[T]) stopAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, it := range s.items {
		it.mu.Lock()
		it.stop()
		it.mu.Unlock()
	}
}

// syncedStore is a reflector's store that tells when its first list has arrived.
type syncedStore struct {
	cache.Store
	once   sync.Once
	synced chan struct{} // closed once listed
}

func newSyncedStore() *syncedStore {
	return &syncedStore{Store: cache.NewStore(cache.MetaNamespaceKeyFunc), synced: make(chan struct{})}
}

func (s *syncedStore) Replace(list []any, rv string) error {
	err := s.Store.Replace(list, rv)
	s.once.Do(func() { close(s.synced) })
	return err
}

func (s *syncedStore) waitSynced(ctx context.Context) bool {
	select {
	case <-s.synced:
		return true
	case <-ctx.Done():
		return false
	}
}
