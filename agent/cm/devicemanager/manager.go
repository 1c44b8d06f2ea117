// Package devicemanager is the kubelet's device manager: device plugins register on the socket
// `<root-dir>/device-plugins/kubelet.sock`, their healthy devices become the Node's extended
// resources, pods asking for them get devices at admission (the plugin's Allocate answer applied
// to the container: environment, mounts, device nodes, annotations, CDI device names), and the
// allocations survive restarts in the kubelet's checkpoint file beside the socket.
package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodelet/nodelet/agent/cm/devicemanager/checkpoint"
	"github.com/nodelet/nodelet/internal/unixsock"
)

// Dir is the device plugin folder under the agent's root directory; plugins written for the
// kubelet look for `/var/lib/kubelet/device-plugins/kubelet.sock`, so a node that runs them
// unchanged uses `--root-dir /var/lib/kubelet`.
func Dir(rootDir string) string { return filepath.Join(rootDir, "device-plugins") }

// Deps are what the manager asks of the rest of the agent.
type Deps struct {
	// Holds reports whether a pod still holds what it was given (podstate.View.HoldsCPUs); the
	// devices of the others are given back.
	Holds func(podUID string) bool
	// SourcesReady reports whether every pod source has spoken since the start; until then no
	// device is given back, and a container found running is not allocated again.
	SourcesReady func() bool
	// Running lists the containers running, as pod UID + "/" + container name; asked once, at the
	// first admission before every source has spoken (an agent restarting); nil: none.
	Running func(ctx context.Context) (sets.Set[string], error)
	Log     *slog.Logger
	// Now is the clock of the plugins' grace period (tests move it).
	Now func() time.Time
}

// Manager is the device manager.
type Manager struct {
	dir  string
	deps Deps
	log  *slog.Logger

	mu sync.Mutex
	// endpoints are the plugins by resource, connected or gone (within the grace period).
	endpoints map[string]*endpoint
	// all are the devices each plugin last listed; healthy and unhealthy split them.
	all       map[string]map[string]*pluginapi.Device
	healthy   map[string]sets.Set[string]
	unhealthy map[string]sets.Set[string]
	pods      podDevices
	// allocated are the devices held by resource (pods' devices, and those being allocated).
	allocated map[string]sets.Set[string]
	// running are the containers found running at the start (pod UID/container name).
	running     sets.Set[string]
	runningOnce sync.Once
	// serving is the context Start was given, until Serve ends: plugins are followed for as long
	// (nil before and after).
	serving context.Context
	// writing orders the checkpoint's writers: each takes its snapshot and writes it under it, so
	// an older snapshot never lands over a newer one.
	writing sync.Mutex
	// followers are the goroutines reading the plugins' device lists; Serve waits for them.
	followers sync.WaitGroup
	// hadCheckpoint: the folder held a checkpoint at the start (else the Node may be a new one
	// over an old name, whose extended resources nobody vouches for any more).
	hadCheckpoint bool
}

// New makes the manager of the device plugin folder dir (Dir of the root directory).
func New(dir string, d Deps) *Manager {
	if d.Log == nil {
		d.Log = slog.Default()
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Holds == nil {
		d.Holds = func(string) bool { return true }
	}
	if d.SourcesReady == nil {
		d.SourcesReady = func() bool { return true }
	}
	m := &Manager{dir: dir, deps: d, log: d.Log.With("component", "devicemanager"),
		endpoints: map[string]*endpoint{}, all: map[string]map[string]*pluginapi.Device{},
		healthy: map[string]sets.Set[string]{}, unhealthy: map[string]sets.Set[string]{},
		pods: podDevices{}, allocated: map[string]sets.Set[string]{}, running: sets.New[string]()}
	// The allocations of the pods already running must be known before they are admitted again.
	m.restore()
	return m
}

// learnRunning asks once, while the sources have not all spoken, which containers run: those
// have their devices already.
func (m *Manager) learnRunning(ctx context.Context) {
	if m.deps.Running == nil || m.deps.SourcesReady() {
		return
	}
	m.runningOnce.Do(func() {
		running, err := m.deps.Running(ctx)
		if err != nil {
			m.log.Warn("running containers unknown; devices of pods admitted again are allocated again", "err", err)
			return
		}
		m.mu.Lock()
		m.running = running
		m.mu.Unlock()
	})
}

// SocketPath is the registration socket.
func (m *Manager) SocketPath() string { return filepath.Join(m.dir, "kubelet.sock") }

// Start opens the registration socket; Serve then answers the plugins.
func (m *Manager) Start(ctx context.Context) (net.Listener, error) {
	if err := os.MkdirAll(m.dir, 0o750); err != nil {
		return nil, fmt.Errorf("device plugin folder: %w", err)
	}
	// The sockets of plugins registered with an earlier agent are removed: a plugin watches for
	// that (or for kubelet.sock made again) to register anew.
	if err := m.removeSockets(); err != nil {
		return nil, err
	}
	ln, err := unixsock.Listen(m.SocketPath())
	if err != nil {
		return nil, fmt.Errorf("device plugin registration socket: %w", err)
	}
	m.mu.Lock()
	m.serving = ctx
	m.mu.Unlock()
	return ln, nil
}

// Serve answers registrations on ln until ctx ends, then closes every plugin connection and
// removes the socket.
func (m *Manager) Serve(ctx context.Context, ln net.Listener) error {
	srv := grpc.NewServer(grpc.MaxRecvMsgSize(maxPluginMessage))
	pluginapi.RegisterRegistrationServer(srv, &registration{m: m, ctx: ctx})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		srv.Stop()
		<-done
	case err := <-done:
		m.stopServing()
		return fmt.Errorf("device plugin registration server: %w", err)
	}
	m.stopServing()
	return nil
}

// stopServing closes every plugin connection, waits for their followers, and removes the socket.
// No follower starts once serving is cleared.
func (m *Manager) stopServing() {
	m.mu.Lock()
	m.serving = nil
	m.mu.Unlock()
	m.closeAll()
	m.followers.Wait()
	os.Remove(m.SocketPath())
}

// Run is Start then Serve.
func (m *Manager) Run(ctx context.Context) error {
	ln, err := m.Start(ctx)
	if err != nil {
		return err
	}
	return m.Serve(ctx, ln)
}

func (m *Manager) closeAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.endpoints {
		e.close()
	}
}

// removeSockets removes every socket in the folder but keeps the rest (the checkpoint).
func (m *Manager) removeSockets() error {
	entries, err := os.ReadDir(m.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Type()&os.ModeSocket == 0 {
			continue
		}
		if err := os.Remove(filepath.Join(m.dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// restore reads the checkpoint: the allocations, and the resources registered then, which stay
// in the capacity at zero until their plugins come back (or their grace period ends).
func (m *Manager) restore() {
	entries, registered, err := checkpoint.Read(m.dir)
	if errors.Is(err, checkpoint.ErrNotFound) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hadCheckpoint = true
	if err != nil {
		m.log.Error("device checkpoint unreadable; allocations of running pods are not known", "err", err)
		return
	}
	m.pods = fromEntries(entries, m.log)
	m.allocated = m.pods.inUse()
	now := m.deps.Now()
	for resource := range registered {
		m.healthy[resource] = sets.New[string]()
		m.unhealthy[resource] = sets.New[string]()
		m.endpoints[resource] = &endpoint{resource: resource, stopped: now}
	}
}

// ShouldResetExtendedResourceCapacity is true when the agent started without a checkpoint: a
// Node that already exists then belongs to an earlier life of this machine (or a wiped root
// directory), and its extended resources are zeroed until their plugins register again, as the
// kubelet does.
func (m *Manager) ShouldResetExtendedResourceCapacity() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.hadCheckpoint
}

// writeCheckpoint saves the allocations and the resources with healthy devices. Called without mu.
func (m *Manager) writeCheckpoint() error {
	m.writing.Lock()
	defer m.writing.Unlock()
	m.mu.Lock()
	entries := m.pods.entries(m.log)
	registered := map[string][]string{}
	for resource, ids := range m.healthy {
		registered[resource] = sets.List(ids)
	}
	m.mu.Unlock()
	if err := checkpoint.Write(m.dir, entries, registered); err != nil {
		m.log.Error("device checkpoint not written", "err", err)
		return fmt.Errorf("failed to write checkpoint file %q: %w", checkpoint.FileName, err)
	}
	return nil
}

// connected makes e the plugin of its resource (a plugin registering again replaces its old
// connection).
func (m *Manager) connected(e *endpoint) {
	m.mu.Lock()
	old := m.endpoints[e.resource]
	m.endpoints[e.resource] = e
	m.mu.Unlock()
	if old != nil {
		old.close()
	}
	m.log.Info("device plugin connected", "resourceName", e.resource, "endpoint", e.path)
}

// disconnected marks e's devices unhealthy and starts its grace period, unless another
// registration replaced it meanwhile.
func (m *Manager) disconnected(e *endpoint, err error) {
	m.mu.Lock()
	if m.endpoints[e.resource] != e {
		m.mu.Unlock()
		return
	}
	if m.unhealthy[e.resource] == nil {
		m.unhealthy[e.resource] = sets.New[string]()
	}
	m.unhealthy[e.resource] = m.unhealthy[e.resource].Union(m.healthy[e.resource])
	m.healthy[e.resource] = sets.New[string]()
	e.stopped = m.deps.Now()
	m.mu.Unlock()
	e.close()
	m.log.Info("device plugin gone; its devices are unhealthy", "resourceName", e.resource, "err", err)
}

// listed takes a plugin's ListAndWatch answer: its devices now, each healthy or not.
func (m *Manager) listed(e *endpoint, devices []*pluginapi.Device) {
	m.mu.Lock()
	if m.endpoints[e.resource] != e {
		m.mu.Unlock()
		return
	}
	all := map[string]*pluginapi.Device{}
	healthy, unhealthy := sets.New[string](), sets.New[string]()
	for _, d := range devices {
		if d == nil || d.ID == "" {
			continue
		}
		all[d.ID] = d
		if d.Health == pluginapi.Healthy {
			healthy.Insert(d.ID)
		} else {
			unhealthy.Insert(d.ID)
		}
	}
	m.all[e.resource], m.healthy[e.resource], m.unhealthy[e.resource] = all, healthy, unhealthy
	m.mu.Unlock()
	m.writeCheckpoint()
	m.log.Info("device plugin listed its devices", "resourceName", e.resource, "totalCount", len(all), "healthyCount", healthy.Len())
}

// Capacity is the device plugins' share of the Node: each resource's devices (capacity) and
// healthy devices (allocatable), and the resources whose plugin's grace period ended, which the
// Node keeps at zero. A resource is withdrawn once: the next call no longer names it.
func (m *Manager) Capacity() (capacity, allocatable v1.ResourceList, removed []string) {
	capacity, allocatable = v1.ResourceList{}, v1.ResourceList{}
	now := m.deps.Now()
	changed := false
	m.mu.Lock()
	for resource, e := range m.endpoints {
		if !e.expired(now) {
			continue
		}
		delete(m.endpoints, resource)
		delete(m.healthy, resource)
		delete(m.unhealthy, resource)
		delete(m.all, resource)
		removed = append(removed, resource)
		changed = true
	}
	for resource := range m.endpoints {
		h, u := int64(m.healthy[resource].Len()), int64(m.unhealthy[resource].Len())
		capacity[v1.ResourceName(resource)] = *quantity(h + u)
		allocatable[v1.ResourceName(resource)] = *quantity(h)
	}
	m.mu.Unlock()
	if changed {
		m.writeCheckpoint()
	}
	return capacity, allocatable, removed
}

func quantity(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.DecimalSI) }

// Allocatable is base with the device plugins' healthy devices, each resource at least the
// devices pods hold (so that pods admitted before a plugin went away are admitted again after a
// restart, as the kubelet's sanitizeNodeAllocatable makes sure): what admission counts against.
func (m *Manager) Allocatable(base func() v1.ResourceList) func() v1.ResourceList {
	return func() v1.ResourceList {
		out := base().DeepCopy()
		if out == nil {
			out = v1.ResourceList{}
		}
		now := m.deps.Now()
		m.mu.Lock()
		defer m.mu.Unlock()
		for resource, e := range m.endpoints {
			if !e.expired(now) {
				out[v1.ResourceName(resource)] = *quantity(int64(m.healthy[resource].Len()))
			}
		}
		for resource, ids := range m.allocated {
			if q, ok := out[v1.ResourceName(resource)]; ids.Len() > 0 && (!ok || q.Value() < int64(ids.Len())) {
				out[v1.ResourceName(resource)] = *quantity(int64(ids.Len()))
			}
		}
		return out
	}
}
