package podobjects

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/nodelet/nodelet/agent/internal/kubeletconfig"
	"github.com/nodelet/nodelet/agent/kubeclient"
)

// The strategies' names, as configMapAndSecretChangeDetectionStrategy spells them.
const (
	Watch = string(kubeletconfig.WatchChangeDetectionStrategy)
	Cache = string(kubeletconfig.TTLCacheChangeDetectionStrategy)
	Get   = string(kubeletconfig.GetChangeDetectionStrategy)
)

// Client is the apiserver as the manager reads it (a *kubeclient.Client is one).
type Client interface {
	Secrets(namespace string) kubeclient.SecretInterface
	ConfigMaps(namespace string) kubeclient.ConfigMapInterface
}

// Config chooses the strategy and its periods.
type Config struct {
	// Strategy is Watch, Cache or Get; "" is Watch, the kubelet's default.
	Strategy string
	// SyncFrequency is the agent's; a watch no read used for five of them (at least a minute) stops.
	SyncFrequency time.Duration
	// Node returns the agent's Node as last seen (Cache reads its TTL annotation); nil or an
	// error keeps the default TTL.
	Node func() (*v1.Node, error)
	// Now is the clock of Cache's TTL and of idle watches; nil is time.Now.
	Now func() time.Time
	Log *slog.Logger
}

// objects is one kind's store under one strategy.
type objects[T runtime.Object] interface {
	get(ctx context.Context, namespace, name string) (T, error)
	addRef(namespace, name string)
	deleteRef(namespace, name string)
}

type idleStopper interface {
	stopIdle(now time.Time)
	stopAll()
}

// Manager serves the Secrets and ConfigMaps of registered pods.
type Manager struct {
	secrets    objects[*v1.Secret]
	configMaps objects[*v1.ConfigMap]
	idle       []idleStopper
	now        func() time.Time

	mu   sync.Mutex
	pods map[types.UID]*v1.Pod // registered, with the references they were registered with
}

// New makes a manager reading through client; Run starts its housekeeping.
func New(client Client, cfg Config) (*Manager, error) {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	m := &Manager{now: now, pods: map[types.UID]*v1.Pod{}}
	secretKind := kind[*v1.Secret]{
		resource: v1.Resource("secret"),
		get: func(ctx context.Context, ns, name string, o metav1.GetOptions) (*v1.Secret, error) {
			return client.Secrets(ns).Get(ctx, name, o)
		},
		list: func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
			return client.Secrets(ns).List(ctx, o)
		},
		watch: func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
			return client.Secrets(ns).Watch(ctx, o)
		},
		immutable: func(s *v1.Secret) bool { return s.Immutable != nil && *s.Immutable },
		newObj:    func() *v1.Secret { return &v1.Secret{} },
	}
	configMapKind := kind[*v1.ConfigMap]{
		resource: v1.Resource("configmap"),
		get: func(ctx context.Context, ns, name string, o metav1.GetOptions) (*v1.ConfigMap, error) {
			return client.ConfigMaps(ns).Get(ctx, name, o)
		},
		list: func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
			return client.ConfigMaps(ns).List(ctx, o)
		},
		watch: func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
			return client.ConfigMaps(ns).Watch(ctx, o)
		},
		immutable: func(c *v1.ConfigMap) bool { return c.Immutable != nil && *c.Immutable },
		newObj:    func() *v1.ConfigMap { return &v1.ConfigMap{} },
	}
	switch cfg.Strategy {
	case Watch, "":
		maxIdle := max(5*cfg.SyncFrequency, time.Minute)
		s := newWatchStore(secretKind, client, maxIdle, now, log)
		c := newWatchStore(configMapKind, client, maxIdle, now, log)
		m.secrets, m.configMaps = s, c
		m.idle = append(m.idle, s, c)
	case Cache:
		ttl := func() time.Duration { return nodeTTL(cfg.Node) }
		m.secrets = newCacheStore(secretKind, ttl, now)
		m.configMaps = newCacheStore(configMapKind, ttl, now)
	case Get:
		m.secrets, m.configMaps = getStore[*v1.Secret]{secretKind}, getStore[*v1.ConfigMap]{configMapKind}
	default:
		return nil, CheckStrategy(cfg.Strategy)
	}
	return m, nil
}

// CheckStrategy refuses a configMapAndSecretChangeDetectionStrategy the manager does not know
// (standalone agents check it too, though they read objects from the manifest folder).
func CheckStrategy(s string) error {
	switch s {
	case Watch, Cache, Get, "":
		return nil
	}
	return fmt.Errorf("configMapAndSecretChangeDetectionStrategy %q: want Watch, Cache or Get", s)
}

// Run stops idle watches every minute, as the kubelet checks, until ctx ends; then every watch.
func (m *Manager) Run(ctx context.Context) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			for _, s := range m.idle {
				s.stopAll()
			}
			return
		case <-t.C:
			for _, s := range m.idle {
				s.stopIdle(m.now())
			}
		}
	}
}

// Secret returns a Secret a registered pod references.
func (m *Manager) Secret(ctx context.Context, namespace, name string) (*v1.Secret, error) {
	return m.secrets.get(ctx, namespace, name)
}

// ConfigMap returns a ConfigMap a registered pod references.
func (m *Manager) ConfigMap(ctx context.Context, namespace, name string) (*v1.ConfigMap, error) {
	return m.configMaps.get(ctx, namespace, name)
}

// RegisterPod makes the objects pod references readable. A pod already registered with the same
// references is left as is: the agent registers at every sync, and under Cache a registration
// drops what it references (the kubelet registers on each update of the pod from its sources).
func (m *Manager) RegisterPod(pod *v1.Pod) {
	m.mu.Lock()
	defer m.mu.Unlock()
	prev := m.pods[pod.UID]
	if prev != nil && maps.Equal(secretNames(prev), secretNames(pod)) && maps.Equal(configMapNames(prev), configMapNames(pod)) {
		return
	}
	// New references first, then the old ones go: an object both use keeps its watch.
	for name := range secretNames(pod) {
		m.secrets.addRef(pod.Namespace, name)
	}
	for name := range configMapNames(pod) {
		m.configMaps.addRef(pod.Namespace, name)
	}
	m.pods[pod.UID] = pod
	if prev != nil {
		m.release(prev)
	}
}

// UnregisterPod drops pod's references; its objects' watches stop when no other pod uses them.
func (m *Manager) UnregisterPod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if prev := m.pods[uid]; prev != nil {
		delete(m.pods, uid)
		m.release(prev)
	}
}

func (m *Manager) release(pod *v1.Pod) {
	for name := range secretNames(pod) {
		m.secrets.deleteRef(pod.Namespace, name)
	}
	for name := range configMapNames(pod) {
		m.configMaps.deleteRef(pod.Namespace, name)
	}
}

// defaultTTL is Cache's TTL when the Node carries none, as the kubelet's.
const defaultTTL = time.Minute

// nodeTTL reads node.alpha.kubernetes.io/ttl (seconds), which the TTL controller sets by cluster
// size (0 up to 100 nodes).
func nodeTTL(node func() (*v1.Node, error)) time.Duration {
	if node == nil {
		return defaultTTL
	}
	n, err := node()
	if err != nil || n == nil {
		return defaultTTL
	}
	v, ok := n.Annotations[v1.ObjectTTLAnnotationKey]
	if !ok {
		return defaultTTL
	}
	s, err := strconv.Atoi(v)
	if err != nil || s < 0 {
		return defaultTTL
	}
	return time.Duration(s) * time.Second
}

// notRegistered is the kubelet's error for a read of an object no registered pod references.
func notRegistered(namespace, name string) error {
	return fmt.Errorf("object %q/%q not registered", namespace, name)
}
