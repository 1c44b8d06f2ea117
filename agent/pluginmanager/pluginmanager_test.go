package pluginmanager

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// registrar is a plugin's registration socket, as node-driver-registrar serves it.
type registrar struct {
	registerapi.UnimplementedRegistrationServer
	info   *registerapi.PluginInfo
	srv    *grpc.Server
	socket string

	mu       sync.Mutex
	statuses []*registerapi.RegistrationStatus
}

func serveRegistrar(t *testing.T, socket string, info *registerapi.PluginInfo) *registrar {
	t.Helper()
	r := &registrar{info: info, socket: socket, srv: grpc.NewServer()}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	registerapi.RegisterRegistrationServer(r.srv, r)
	go r.srv.Serve(ln)
	t.Cleanup(r.srv.Stop)
	return r
}

func (r *registrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return r.info, nil
}

func (r *registrar) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	r.mu.Lock()
	r.statuses = append(r.statuses, s)
	r.mu.Unlock()
	return &registerapi.RegistrationStatusResponse{}, nil
}

func (r *registrar) lastStatus() *registerapi.RegistrationStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.statuses) == 0 {
		return nil
	}
	return r.statuses[len(r.statuses)-1]
}

// handler records what it is asked; it refuses plugins named "bad".
type handler struct {
	mu     sync.Mutex
	events []string
}

func (h *handler) ValidatePlugin(name, _ string, _ []string) error {
	if name == "bad" {
		return errors.New("bad plugin")
	}
	return nil
}

func (h *handler) RegisterPlugin(name, endpoint string, _ []string) error {
	h.mu.Lock()
	h.events = append(h.events, "register "+name+" "+filepath.Base(endpoint))
	h.mu.Unlock()
	return nil
}

func (h *handler) DeRegisterPlugin(name, endpoint string) {
	h.mu.Lock()
	h.events = append(h.events, "deregister "+name+" "+filepath.Base(endpoint))
	h.mu.Unlock()
}

func (h *handler) seen() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

func TestPluginsRegisterAndDeregister(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "plugins_registry")
	h := &handler{}
	m := New(dir, map[string]Handler{registerapi.CSIPlugin: h}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	// A plugin whose socket is there before the manager starts is found by the walk.
	os.MkdirAll(dir, 0o750)
	early := serveRegistrar(t, filepath.Join(dir, "early-reg.sock"), &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "early.csi.example.com",
		Endpoint: "/csi/early.sock", SupportedVersions: []string{"1.0.0"}})
	go func() { done <- m.Run(ctx) }()
	waitFor(t, "the early plugin registered and told so", func() bool {
		s := early.lastStatus()
		return s != nil && s.PluginRegistered
	})

	// One made later in a folder made later; a refused one; one of a type nobody handles.
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o750)
	late := serveRegistrar(t, filepath.Join(sub, "late-reg.sock"), &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "late.csi.example.com"})
	bad := serveRegistrar(t, filepath.Join(dir, "bad-reg.sock"), &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: "bad"})
	other := serveRegistrar(t, filepath.Join(dir, "dra-reg.sock"), &registerapi.PluginInfo{Type: registerapi.DRAPlugin, Name: "dra.example.com"})
	waitFor(t, "every plugin told its fate", func() bool {
		l, b, o := late.lastStatus(), bad.lastStatus(), other.lastStatus()
		return l != nil && b != nil && o != nil
	})
	if s := late.lastStatus(); !s.PluginRegistered {
		t.Errorf("late plugin: %+v", s)
	}
	if s := bad.lastStatus(); s.PluginRegistered || s.Error != "RegisterPlugin error -- plugin validation failed with err: bad plugin" {
		t.Errorf("refused plugin told %+v", s)
	}
	if s := other.lastStatus(); s.PluginRegistered || s.Error != "RegisterPlugin error -- no handler registered for plugin type: DRAPlugin at socket "+other.socket {
		t.Errorf("unhandled plugin told %+v", s)
	}

	// The socket goes: the plugin is deregistered.
	late.srv.Stop()
	os.Remove(late.socket)
	waitFor(t, "the late plugin deregistered", func() bool {
		return slices.Contains(h.seen(), "deregister late.csi.example.com late-reg.sock")
	})
	// The manager stops: every plugin still registered is deregistered.
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	want := []string{"register early.csi.example.com early.sock", "register late.csi.example.com late-reg.sock",
		"deregister late.csi.example.com late-reg.sock", "deregister early.csi.example.com early.sock"}
	if got := h.seen(); !slices.Equal(got, want) {
		t.Errorf("handler saw %q, want %q", got, want)
	}
}
