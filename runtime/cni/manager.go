// Package cni gives pods their network through CNI plugins (libcni with Debian's
// containernetworking-plugins). It implements the runtime server's NetworkPlugin seam.
//
// Life of a pod's network:
//
//	SetUpPod     lo up ─► mark pending ─► CNI ADD (result cached by libcni) ─► unmark ─► IPs
//	             ADD failed ─► CNI DEL with the same config and args (rollback) ─► unmark ─► error
//	TearDownPod  config and args from libcni's cache, else from the pending mark, else the
//	             current config ─► CNI DEL (netns gone: in a stand-in netns holding the pod's
//	             old addresses, so the bridge plugin finds its masquerade rules) ─► cache and
//	             mark removed
//
// The cache and the mark live under the state dir, so a DEL after a daemon restart, or after a
// crash in the middle of an ADD, runs with exactly the config and capability args of the ADD (portmap
// needs its port mappings to find its rules), and the IP is released by host-local's container ID.
// A pod with neither gets a DEL with the current config and its own arguments: harmless when it
// never had a network, and what frees its IP when the state dir was lost but host-local's store
// was not. StateDir belongs on persistent storage (as libcni's default /var/lib/cni is).
package cni

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/fsnotify/fsnotify"
)

// Default locations; every one is an Options field.
const (
	DefaultConfDir  = "/etc/cni/net.d"
	DefaultStateDir = "/var/lib/nodelet/runtime/cni"
	DefaultIfName   = "eth0"
)

// DefaultBinDirs are searched in order: Debian's plugin folder, then the upstream one.
var DefaultBinDirs = []string{"/usr/lib/cni", "/opt/cni/bin"}

// Options configure a Manager. The zero value is the production setup.
type Options struct {
	ConfDir  string   // where .conflist files are read from; DefaultConfDir
	BinDirs  []string // plugin search path; DefaultBinDirs
	StateDir string   // libcni's result cache and ADD-in-progress marks, persistent; DefaultStateDir
	IfName   string   // interface name inside the pod; DefaultIfName

	// Default is written into ConfDir at start when it holds no config file at all.
	Default DefaultNetwork
	// NoDefault disables writing Default (for hosts whose network is managed by something else).
	NoDefault bool

	// Exec runs plugins; nil runs them as processes. Tests inject failures through it.
	Exec   invoke.Exec
	Logger *slog.Logger
}

// Manager holds the current network configuration and runs CNI for pods.
type Manager struct {
	opts Options
	cni  *libcni.CNIConfig
	log  *slog.Logger

	mu       sync.RWMutex
	cur      loadResult
	loadedAt time.Time

	locks   sync.Mutex
	podLock map[string]*podLock

	watcher *fsnotify.Watcher
	done    chan struct{}
	wg      sync.WaitGroup
}

type podLock struct {
	sync.Mutex
	refs int
}

// New loads the configuration (writing the default one into an empty conf dir) and watches the
// conf dir for changes. A missing or invalid configuration is not an error here: Status reports
// it, so the runtime can start and say NetworkReady=false until an admin fixes it.
func New(opts Options) (*Manager, error) {
	if opts.ConfDir == "" {
		opts.ConfDir = DefaultConfDir
	}
	if len(opts.BinDirs) == 0 {
		opts.BinDirs = DefaultBinDirs
	}
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir
	}
	if opts.IfName == "" {
		opts.IfName = DefaultIfName
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	m := &Manager{
		opts:    opts,
		cni:     libcni.NewCNIConfigWithCacheDir(opts.BinDirs, filepath.Join(opts.StateDir, "cache"), opts.Exec),
		log:     opts.Logger.With("component", "cni"),
		podLock: map[string]*podLock{},
		done:    make(chan struct{}),
	}
	// Made even without a default network, so there is a dir to watch for the admin's config.
	if err := os.MkdirAll(opts.ConfDir, 0o755); err != nil {
		m.log.Warn("cannot create the CNI conf dir", "dir", opts.ConfDir, "err", err)
	}
	if !opts.NoDefault {
		wrote, err := writeDefault(opts.ConfDir, opts.Default)
		if err != nil {
			m.log.Warn("cannot write the default CNI network", "dir", opts.ConfDir, "err", err)
		} else if wrote {
			m.log.Info("wrote the default CNI network", "file", filepath.Join(opts.ConfDir, defaultConfName),
				"subnet", opts.Default.withDefaults().Subnet)
		}
	}
	m.Reload(context.Background())
	w, err := fsnotify.NewWatcher()
	if err == nil {
		err = w.Add(opts.ConfDir)
		if err != nil {
			w.Close()
		}
	}
	if err != nil {
		// Without a watcher the config is still re-read whenever a pod needs it and none is loaded.
		m.log.Warn("cannot watch the CNI conf dir; changes are picked up only while no config is loaded",
			"dir", opts.ConfDir, "err", err)
		return m, nil
	}
	m.watcher = w
	m.wg.Add(1)
	go m.watch()
	return m, nil
}

// Close stops watching the conf dir. Pods keep their network.
func (m *Manager) Close() error {
	select {
	case <-m.done:
		return nil
	default:
	}
	close(m.done)
	var err error
	if m.watcher != nil {
		err = m.watcher.Close()
	}
	m.wg.Wait()
	return err
}

func (m *Manager) watch() {
	defer m.wg.Done()
	for {
		select {
		case <-m.done:
			return
		case ev, ok := <-m.watcher.Events:
			if !ok {
				return
			}
			if ev.Op == fsnotify.Chmod {
				continue
			}
			m.Reload(context.Background())
		case err, ok := <-m.watcher.Errors:
			if !ok {
				return
			}
			m.log.Warn("CNI conf dir watch", "err", err)
		}
	}
}

// Reload re-reads the conf dir now. The watcher calls it on every change.
func (m *Manager) Reload(ctx context.Context) {
	if m.watcher != nil {
		// Re-arms the watch after the dir was deleted and made again; a no-op otherwise.
		_ = m.watcher.Add(m.opts.ConfDir)
	}
	r := load(ctx, m.cni, m.opts.ConfDir)
	m.mu.Lock()
	prev := m.cur
	m.cur, m.loadedAt = r, time.Now()
	m.mu.Unlock()
	switch {
	case r.err != nil && (prev.err == nil || prev.err.Error() != r.err.Error()):
		m.log.Warn("no usable CNI network", "reason", r.err)
	case r.err == nil && (prev.file != r.file || prev.list == nil || string(prev.list.Bytes) != string(r.list.Bytes)):
		m.log.Info("CNI network loaded", "file", r.file, "network", r.list.Name)
	}
}

// Status is nil when a usable network config is loaded; otherwise its error text says why, for
// the NetworkReady=false condition. While not ready it re-reads the conf dir (at most once per
// retryInterval), so a config appears even where the watcher cannot see it (a conf dir that was
// deleted and made again, or inotify limits).
func (m *Manager) Status() error {
	m.mu.RLock()
	err, last := m.cur.err, m.loadedAt
	m.mu.RUnlock()
	if err == nil || time.Since(last) < retryInterval {
		return err
	}
	m.Reload(context.Background())
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.cur.err
}

// retryInterval spaces Status's re-reads of a conf dir without a usable config.
const retryInterval = time.Second

// ConfigFile is the file the current network comes from, "" when none is usable.
func (m *Manager) ConfigFile() string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.cur.file
}

// network returns the current config, re-reading the conf dir once when none is loaded (so a
// config dropped in while the watcher lagged, or without a watcher, is found by the first pod).
func (m *Manager) network(ctx context.Context) (*libcni.NetworkConfigList, error) {
	m.mu.RLock()
	r := m.cur
	m.mu.RUnlock()
	if r.list != nil {
		return r.list, nil
	}
	m.Reload(ctx)
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.cur.list, m.cur.err
}

// lockPod serialises ADD and DEL of one sandbox; different sandboxes run in parallel.
func (m *Manager) lockPod(id string) func() {
	m.locks.Lock()
	l := m.podLock[id]
	if l == nil {
		l = &podLock{}
		m.podLock[id] = l
	}
	l.refs++
	m.locks.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		m.locks.Lock()
		l.refs--
		if l.refs == 0 {
			delete(m.podLock, id)
		}
		m.locks.Unlock()
	}
}
