// Package pluginmanager is the kubelet's plugin manager: node plugins (CSI drivers through their
// node-driver-registrar, device plugins, DRA drivers) put a registration socket in
// `<root-dir>/plugins_registry/`; the manager finds it, asks it who it is (the pluginregistration
// v1 API's GetInfo), hands it to the handler of its type, and tells it the outcome
// (NotifyRegistrationStatus). A socket removed deregisters the plugin; a socket made anew (a
// plugin restarted) registers it again.
package pluginmanager

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/nodelet/nodelet/internal/unixsock"
)

// Dir is the registration folder under the agent's root directory, where registrars written for
// the kubelet (node-driver-registrar's --kubelet-registration-path) put their sockets.
func Dir(rootDir string) string { return filepath.Join(rootDir, "plugins_registry") }

// Handler is what the consumer of one plugin type does with its plugins (the kubelet's
// cache.PluginHandler).
type Handler interface {
	// ValidatePlugin refuses a plugin the consumer cannot use (its name, its versions).
	ValidatePlugin(name, endpoint string, versions []string) error
	// RegisterPlugin starts using the plugin at endpoint.
	RegisterPlugin(name, endpoint string, versions []string) error
	// DeRegisterPlugin stops using it.
	DeRegisterPlugin(name, endpoint string)
}

// retryEvery is how often a registration that failed is tried again while its socket is there,
// as the kubelet's reconciler does each second.
const retryEvery = time.Second

// callTimeout bounds each registration call; the kubelet gives GetInfo a second.
const callTimeout = 10 * time.Second

// Manager finds the plugins in its folder and registers them with their handlers.
type Manager struct {
	dir      string
	handlers map[string]Handler
	log      *slog.Logger

	mu sync.Mutex
	// want are the sockets found, each with the generation of its last creation.
	want map[string]found
	gen  uint64
	// have are the plugins registered, by socket.
	have map[string]registered
	// failed are the sockets whose registration failed: when to try again, and the delay after.
	failed map[string]retry
}

// retry is a failed registration's back-off: one second, doubling to two minutes, as the
// kubelet's operation executor backs off.
type retry struct {
	at    time.Time
	delay time.Duration
}

const maxRetryDelay = 2 * time.Minute

// found is a socket as last found: the file it is, and the generation it was given. The same
// file found twice (the folder's walk and its creation event both see a new socket) keeps its
// generation; a socket made anew is another file.
type found struct {
	dev, ino uint64
	gen      uint64
}

// registered is a plugin handed to its handler, and the socket generation it came from.
type registered struct {
	gen            uint64
	name, endpoint string
	handler        Handler
}

// New makes the manager of dir with a handler for each plugin type (registerapi.CSIPlugin,
// registerapi.DevicePlugin…); a plugin of another type is told so and left alone.
func New(dir string, handlers map[string]Handler, log *slog.Logger) *Manager {
	if log == nil {
		log = slog.Default()
	}
	return &Manager{dir: dir, handlers: handlers, log: log.With("component", "pluginmanager"),
		want: map[string]found{}, have: map[string]registered{}, failed: map[string]retry{}}
}

// Run watches the folder and registers its plugins until ctx ends; then every plugin is
// deregistered, as its consumer must not keep using it with nobody watching its socket.
func (m *Manager) Run(ctx context.Context) error {
	if err := os.MkdirAll(m.dir, 0o750); err != nil {
		return fmt.Errorf("plugin registration folder: %w", err)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("plugin registration folder: %w", err)
	}
	defer w.Close()
	// The watch is set before the walk, so a socket made meanwhile is seen by one or the other.
	if err := m.watchTree(w, m.dir); err != nil {
		return err
	}
	tick := time.NewTicker(retryEvery)
	defer tick.Stop()
	for {
		m.reconcile(ctx)
		select {
		case <-ctx.Done():
			m.deregisterAll()
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("plugin registration folder: watch closed")
			}
			m.event(w, ev)
		case err := <-w.Errors:
			m.log.Warn("plugin registration folder watch", "err", err)
		case <-tick.C:
		}
	}
}

// watchTree watches dir and the folders below it, and takes the sockets found there.
func (m *Manager) watchTree(w *fsnotify.Watcher, dir string) error {
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watch %s: %w", dir, err)
	}
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case d.IsDir():
			if err := w.Add(p); err != nil {
				m.log.Warn("plugin folder not watched", "path", p, "err", err)
			}
		case d.Type()&fs.ModeSocket != 0:
			m.foundSocket(p)
		}
		return nil
	})
}

// event takes one change of the folder: a socket or folder made, a socket removed.
func (m *Manager) event(w *fsnotify.Watcher, ev fsnotify.Event) {
	if strings.HasPrefix(filepath.Base(ev.Name), ".") {
		return
	}
	switch {
	case ev.Has(fsnotify.Create):
		fi, err := os.Lstat(ev.Name)
		if err != nil {
			return
		}
		if fi.IsDir() {
			if err := m.watchTree(w, ev.Name); err != nil {
				m.log.Warn("plugin folder not watched", "path", ev.Name, "err", err)
			}
		} else if fi.Mode()&fs.ModeSocket != 0 {
			m.foundSocket(ev.Name)
		}
	case ev.Has(fsnotify.Remove), ev.Has(fsnotify.Rename):
		m.mu.Lock()
		delete(m.want, ev.Name)
		delete(m.failed, ev.Name)
		m.mu.Unlock()
	}
}

func (m *Manager) foundSocket(socket string) {
	var st unix.Stat_t
	if err := unix.Lstat(socket, &st); err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.want[socket]; ok && cur.dev == st.Dev && cur.ino == st.Ino {
		return
	}
	m.gen++
	m.want[socket] = found{dev: st.Dev, ino: st.Ino, gen: m.gen}
	delete(m.failed, socket) // a socket made anew is tried at once
	m.log.Info("plugin socket found", "path", socket)
}

// reconcile deregisters the plugins whose socket went or was made anew, and registers the
// sockets not registered yet (those that failed before are tried again).
func (m *Manager) reconcile(ctx context.Context) {
	m.mu.Lock()
	var drop []string
	for socket, r := range m.have {
		if f, ok := m.want[socket]; !ok || f.gen != r.gen {
			drop = append(drop, socket)
		}
	}
	m.mu.Unlock()
	for _, socket := range drop {
		m.deregister(socket)
	}
	now := time.Now()
	m.mu.Lock()
	var add []string
	for socket := range m.want {
		if _, ok := m.have[socket]; !ok && !now.Before(m.failed[socket].at) {
			add = append(add, socket)
		}
	}
	m.mu.Unlock()
	for _, socket := range add {
		err := m.register(ctx, socket)
		if err == nil || ctx.Err() != nil {
			continue
		}
		m.mu.Lock()
		r := m.failed[socket]
		r.delay = min(max(2*r.delay, retryEvery), maxRetryDelay)
		r.at = time.Now().Add(r.delay)
		m.failed[socket] = r
		m.mu.Unlock()
		m.log.Warn("plugin not registered", "path", socket, "err", err, "retry", r.delay)
	}
}

func (m *Manager) deregister(socket string) {
	m.mu.Lock()
	r, ok := m.have[socket]
	delete(m.have, socket)
	m.mu.Unlock()
	if ok {
		r.handler.DeRegisterPlugin(r.name, r.endpoint)
		m.log.Info("plugin deregistered", "name", r.name, "path", socket)
	}
}

func (m *Manager) deregisterAll() {
	m.mu.Lock()
	var all []string
	for socket := range m.have {
		all = append(all, socket)
	}
	m.mu.Unlock()
	for _, socket := range all {
		m.deregister(socket)
	}
}

// register asks the plugin at socket who it is, validates and registers it with its type's
// handler, and tells it the outcome, with the kubelet's words.
func (m *Manager) register(ctx context.Context, socket string) error {
	m.mu.Lock()
	gen := m.want[socket].gen
	m.mu.Unlock()
	conn, err := grpc.NewClient("passthrough:///"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return unixsock.Dial(ctx, socket) }))
	if err != nil {
		return fmt.Errorf("RegisterPlugin error -- dial failed at socket %s, err: %w", socket, err)
	}
	defer conn.Close()
	client := registerapi.NewRegistrationClient(conn)
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	info, err := client.GetInfo(cctx, &registerapi.InfoRequest{})
	cancel()
	if err != nil {
		return fmt.Errorf("RegisterPlugin error -- failed to get plugin info using RPC GetInfo at socket %s, err: %w", socket, err)
	}
	h, ok := m.handlers[info.Type]
	if !ok {
		return m.notify(ctx, client, fmt.Sprintf("RegisterPlugin error -- no handler registered for plugin type: %s at socket %s", info.Type, socket))
	}
	endpoint := info.Endpoint
	if endpoint == "" {
		endpoint = socket
	}
	if err := h.ValidatePlugin(info.Name, endpoint, info.SupportedVersions); err != nil {
		return m.notify(ctx, client, fmt.Sprintf("RegisterPlugin error -- plugin validation failed with err: %v", err))
	}
	if err := h.RegisterPlugin(info.Name, endpoint, info.SupportedVersions); err != nil {
		return m.notify(ctx, client, fmt.Sprintf("RegisterPlugin error -- plugin registration failed with err: %v", err))
	}
	m.mu.Lock()
	m.have[socket] = registered{gen: gen, name: info.Name, endpoint: endpoint, handler: h}
	delete(m.failed, socket)
	m.mu.Unlock()
	m.log.Info("plugin registered", "type", info.Type, "name", info.Name, "endpoint", endpoint)
	return m.notify(ctx, client, "")
}

// notify tells the plugin whether it was registered; a refusal is also the error returned.
func (m *Manager) notify(ctx context.Context, client registerapi.RegistrationClient, refusal string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if _, err := client.NotifyRegistrationStatus(ctx, &registerapi.RegistrationStatus{PluginRegistered: refusal == "", Error: refusal}); err != nil {
		return fmt.Errorf("notify plugin: %w", err)
	}
	if refusal != "" {
		return errors.New(refusal)
	}
	return nil
}
