package devicemanager

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

const res = "example.com/resource"

// fakePlugin is a device plugin on a unix socket: it lists its devices, answers Allocate with a
// mount and an environment variable per device, and records the calls.
type fakePlugin struct {
	pluginapi.UnimplementedDevicePluginServer
	opts      pluginapi.DevicePluginOptions
	preferred []string

	mu        sync.Mutex
	devices   []*pluginapi.Device
	update    chan struct{}
	allocated [][]string
	preStarts [][]string
	srv       *grpc.Server
	socket    string
}

func startPlugin(t *testing.T, dir, name string, devices ...*pluginapi.Device) *fakePlugin {
	t.Helper()
	p := &fakePlugin{devices: devices, update: make(chan struct{}, 10), socket: filepath.Join(dir, name)}
	ln, err := net.Listen("unix", p.socket)
	if err != nil {
		t.Fatal(err)
	}
	p.srv = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.srv, p)
	go p.srv.Serve(ln)
	t.Cleanup(p.srv.Stop)
	return p
}

func (p *fakePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &p.opts, nil
}

func (p *fakePlugin) ListAndWatch(_ *pluginapi.Empty, s pluginapi.DevicePlugin_ListAndWatchServer) error {
	for {
		p.mu.Lock()
		devs := p.devices
		p.mu.Unlock()
		if err := s.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return err
		}
		select {
		case <-p.update:
		case <-s.Context().Done():
			return nil
		}
	}
}

func (p *fakePlugin) setDevices(devs ...*pluginapi.Device) {
	p.mu.Lock()
	p.devices = devs
	p.mu.Unlock()
	p.update <- struct{}{}
}

func (p *fakePlugin) Allocate(_ context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	out := &pluginapi.AllocateResponse{}
	for _, c := range r.ContainerRequests {
		p.mu.Lock()
		p.allocated = append(p.allocated, c.DevicesIds)
		p.mu.Unlock()
		resp := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{"DEVICES": strings.Join(c.DevicesIds, ",")},
			Annotations: map[string]string{"example.com/devices": strings.Join(c.DevicesIds, ",")}}
		for _, id := range c.DevicesIds {
			resp.Mounts = append(resp.Mounts, &pluginapi.Mount{ContainerPath: "/dev-" + id, HostPath: "/tmp/" + id, ReadOnly: true})
			resp.CdiDevices = append(resp.CdiDevices, &pluginapi.CDIDevice{Name: res + "=" + id})
		}
		out.ContainerResponses = append(out.ContainerResponses, resp)
	}
	return out, nil
}

func (p *fakePlugin) GetPreferredAllocation(_ context.Context, r *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	return &pluginapi.PreferredAllocationResponse{ContainerResponses: []*pluginapi.ContainerPreferredAllocationResponse{{DeviceIDs: p.preferred}}}, nil
}

func (p *fakePlugin) PreStartContainer(_ context.Context, r *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	p.mu.Lock()
	p.preStarts = append(p.preStarts, r.DevicesIds)
	p.mu.Unlock()
	return &pluginapi.PreStartContainerResponse{}, nil
}

func healthy(ids ...string) []*pluginapi.Device {
	var out []*pluginapi.Device
	for _, id := range ids {
		out = append(out, &pluginapi.Device{ID: id, Health: pluginapi.Healthy})
	}
	return out
}

// clock is the manager's clock, moved by the test.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

type env struct {
	m     *Manager
	dir   string
	clock *clock
	stop  func()
}

// startManager runs a manager on dir until the test ends (or stop).
func startManager(t *testing.T, dir string, d Deps) *env {
	t.Helper()
	c := &clock{now: time.Unix(1_000_000, 0)}
	d.Now = c.Now
	d.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	m := New(dir, d)
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := m.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- m.Serve(ctx, ln) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}
	t.Cleanup(stop)
	return &env{m: m, dir: dir, clock: c, stop: stop}
}

func register(t *testing.T, m *Manager, req *pluginapi.RegisterRequest) error {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+m.SocketPath(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, req)
	return err
}

// waitFor polls cond: the manager takes a plugin's list on a goroutine of its own. The minute is
// a guard against a hang, not a budget.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func capacityIs(m *Manager, capacity, allocatable int64) func() bool {
	return func() bool {
		c, a, _ := m.Capacity()
		cq, aq := c[res], a[res]
		_, hasC := c[res]
		return hasC && cq.Value() == capacity && aq.Value() == allocatable
	}
}

func devicePod(uid string, n int64, init ...v1.Container) *v1.Pod {
	lim := v1.ResourceList{res: *resource.NewQuantity(n, resource.DecimalSI)}
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "default", UID: types.UID(uid)},
		Spec: v1.PodSpec{InitContainers: init, Containers: []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{Limits: lim, Requests: lim}}}}}
}

func TestRegistrationIsValidated(t *testing.T) {
	dir := t.TempDir()
	e := startManager(t, dir, Deps{})
	startPlugin(t, dir, "dp.sock", healthy("a")...)
	for _, tc := range []struct {
		req  *pluginapi.RegisterRequest
		want string
	}{
		{&pluginapi.RegisterRequest{Version: "v1alpha", Endpoint: "dp.sock", ResourceName: res},
			`requested API version "v1alpha" is not supported by kubelet. Supported version is ["v1beta1"]`},
		{&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "dp.sock", ResourceName: "cpu"}, `the ResourceName "cpu" is invalid`},
		{&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "dp.sock", ResourceName: "kubernetes.io/x"}, `the ResourceName "kubernetes.io/x" is invalid`},
		{&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "../dp.sock", ResourceName: res}, `device plugin endpoint "../dp.sock" must be the name of a socket in`},
		{&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "kubelet.sock", ResourceName: res}, `device plugin endpoint "kubelet.sock" must be`},
		{&pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "none.sock", ResourceName: res}, `failed to get device plugin options`},
	} {
		err := register(t, e.m, tc.req)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.req, err, tc.want)
		}
	}
	if c, _, _ := e.m.Capacity(); len(c) != 0 {
		t.Errorf("refused plugins reached the capacity: %v", c)
	}
}

func TestDevicesAllocatedAtAdmissionAndGivenToTheContainer(t *testing.T) {
	dir := t.TempDir()
	holds := sets.New[string]()
	var mu sync.Mutex
	e := startManager(t, dir, Deps{Holds: func(uid string) bool { mu.Lock(); defer mu.Unlock(); return holds.Has(uid) }})
	p := startPlugin(t, dir, "dp.sock", healthy("d1", "d2", "d3")...)
	p.opts = pluginapi.DevicePluginOptions{PreStartRequired: true, GetPreferredAllocationAvailable: true}
	p.preferred = []string{"d3"}
	if err := register(t, e.m, &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "dp.sock", ResourceName: res}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "three healthy devices", capacityIs(e.m, 3, 3))

	ctx := context.Background()
	pod := devicePod("pod-1", 1)
	mu.Lock()
	holds.Insert("pod-1")
	mu.Unlock()
	if err := e.m.Admit(pod); err != nil {
		t.Fatal(err)
	}
	if len(p.allocated) != 1 || strings.Join(p.allocated[0], ",") != "d3" {
		t.Errorf("Allocate calls %v, want the preferred d3", p.allocated)
	}
	opts, err := e.m.RunContainerOptions(ctx, pod, &pod.Spec.Containers[0])
	if err != nil {
		t.Fatal(err)
	}
	if opts.Envs["DEVICES"] != "d3" || len(opts.Mounts) != 1 || opts.Mounts[0].HostPath != "/tmp/d3" || len(opts.CdiDevices) != 1 ||
		opts.Annotations["example.com/devices"] != "d3" {
		t.Errorf("container options %v", opts)
	}
	if len(p.preStarts) != 1 || p.preStarts[0][0] != "d3" {
		t.Errorf("PreStartContainer calls %v", p.preStarts)
	}
	if got := e.m.ContainerDevices("pod-1", "app"); len(got) != 1 || got[0].DeviceIds[0] != "d3" || got[0].ResourceName != res {
		t.Errorf("PodResources devices %v", got)
	}
	if got := e.m.AllocatableDevices(); len(got) != 3 {
		t.Errorf("allocatable devices %v", got)
	}

	// Two more than the two left: refused with the kubelet's words, and nothing kept.
	big := devicePod("pod-2", 3)
	mu.Lock()
	holds.Insert("pod-2")
	mu.Unlock()
	err = e.m.Admit(big)
	if err == nil || err.Error() != "requested number of devices unavailable for example.com/resource. Requested: 3, Available: 2" {
		t.Fatalf("admitting three of two free: %v", err)
	}
	if got := held(e.m); got != 1 {
		t.Errorf("%d devices held after a refusal, want 1", got)
	}

	// A pod gone gives its devices back at the next admission.
	mu.Lock()
	holds.Delete("pod-1")
	mu.Unlock()
	if err := e.m.Admit(big); err != nil {
		t.Fatalf("admitting three once the first pod is gone: %v", err)
	}

	// The plugin goes: its devices stay in the capacity, unhealthy, for the grace period.
	p.srv.Stop()
	waitFor(t, "the gone plugin's devices unhealthy", capacityIs(e.m, 3, 0))
	e.clock.add(gracePeriod + time.Second)
	if _, _, removed := e.m.Capacity(); len(removed) != 1 || removed[0] != res {
		t.Errorf("removed %v after the grace period", removed)
	}
	if c, _, removed := e.m.Capacity(); len(c) != 0 || len(removed) != 0 {
		t.Errorf("after the withdrawal: capacity %v removed %v", c, removed)
	}
}

func TestInitContainerDevicesGoToTheAppContainer(t *testing.T) {
	dir := t.TempDir()
	e := startManager(t, dir, Deps{})
	p := e.plugin(t, "d1", "d2")
	lim := v1.ResourceList{res: *resource.NewQuantity(1, resource.DecimalSI)}
	pod := devicePod("pod-1", 1, v1.Container{Name: "init", Resources: v1.ResourceRequirements{Limits: lim, Requests: lim}})
	if err := e.m.Admit(pod); err != nil {
		t.Fatal(err)
	}
	if got := held(e.m); got != 1 {
		t.Errorf("%d devices held, want the init container's one reused", got)
	}
	if a, b := e.m.ContainerDevices("pod-1", "init"), e.m.ContainerDevices("pod-1", "app"); len(a) != 1 || len(b) != 1 || a[0].DeviceIds[0] != b[0].DeviceIds[0] {
		t.Errorf("init %v app %v", a, b)
	}
	_ = p
}

func TestAllocationsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	e := startManager(t, dir, Deps{})
	if !e.m.ShouldResetExtendedResourceCapacity() {
		t.Error("a first start should reset the Node's extended resources")
	}
	p := e.plugin(t, "d1", "d2")
	pod := devicePod("pod-1", 1)
	if err := e.m.Admit(pod); err != nil {
		t.Fatal(err)
	}
	e.stop()
	if _, err := os.Stat(filepath.Join(dir, "kubelet.sock")); !os.IsNotExist(err) {
		t.Errorf("registration socket left behind: %v", err)
	}

	// Restarted: the pod's container runs, the sources have not all spoken, the plugin has not
	// registered again. The pod is admitted again without a device to spare.
	var ready atomic.Bool
	e2 := startManager(t, dir, Deps{SourcesReady: ready.Load,
		Running: func(context.Context) (sets.Set[string], error) { return sets.New("pod-1/app"), nil }})
	if e2.m.ShouldResetExtendedResourceCapacity() {
		t.Error("a restart with a checkpoint should keep the Node's extended resources")
	}
	if _, err := os.Stat(p.socket); !os.IsNotExist(err) {
		t.Errorf("the earlier plugin's socket was not removed: %v", err)
	}
	if c, a, _ := e2.m.Capacity(); c.Name(res, resource.DecimalSI).Value() != 0 || a.Name(res, resource.DecimalSI).Value() != 0 {
		t.Errorf("before the plugin is back: capacity %v allocatable %v", c, a)
	}
	if err := e2.m.Admit(pod); err != nil {
		t.Fatalf("admitting the running pod again: %v", err)
	}
	if got := e2.m.ContainerDevices("pod-1", "app"); len(got) != 1 {
		t.Errorf("restored devices %v", got)
	}
	ready.Store(true)
	// A new pod waits for the plugin: the kubelet's words.
	if err := e2.m.Admit(devicePod("pod-2", 1)); err == nil ||
		err.Error() != "no healthy devices present; cannot allocate unhealthy devices example.com/resource" {
		t.Errorf("admitting a new pod before the plugin is back: %v", err)
	}
}

func held(m *Manager) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.allocated[res].Len()
}

func TestAllocatableCountsHealthyAndHeldDevices(t *testing.T) {
	dir := t.TempDir()
	e := startManager(t, dir, Deps{})
	p := e.plugin(t, "d1", "d2")
	base := func() v1.ResourceList { return v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")} }
	alloc := e.m.Allocatable(base)
	if got := alloc(); got.Name(res, resource.DecimalSI).Value() != 2 || got.Cpu().Value() != 2 {
		t.Errorf("allocatable %v", got)
	}
	if err := e.m.Admit(devicePod("pod-1", 2)); err != nil {
		t.Fatal(err)
	}
	// One device turns unhealthy: the Node offers one, but admission still counts the two held.
	p.setDevices(&pluginapi.Device{ID: "d1", Health: pluginapi.Healthy}, &pluginapi.Device{ID: "d2", Health: pluginapi.Unhealthy})
	waitFor(t, "one healthy device", capacityIs(e.m, 2, 1))
	if got := alloc(); got.Name(res, resource.DecimalSI).Value() != 2 {
		t.Errorf("allocatable %v, want the two held", got)
	}
}

// plugin starts a plugin of healthy devices ids, registers it and waits for its devices.
func (e *env) plugin(t *testing.T, ids ...string) *fakePlugin {
	t.Helper()
	p := startPlugin(t, e.dir, "dp.sock", healthy(ids...)...)
	if err := register(t, e.m, &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "dp.sock", ResourceName: res}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the plugin's devices", capacityIs(e.m, int64(len(ids)), int64(len(ids))))
	return p
}

// A device plugin may register through the plugin manager's folder instead of kubelet.sock.
func TestRegistrationThroughThePluginManager(t *testing.T) {
	dir := t.TempDir()
	e := startManager(t, dir, Deps{})
	p := startPlugin(t, dir, "elsewhere.sock", healthy("d1")...)
	for _, tc := range []struct {
		name, endpoint string
		versions       []string
		want           string
	}{
		{res, p.socket, []string{"v1alpha"}, `manager version, v1beta1, is not among plugin supported versions [v1alpha]`},
		{"cpu", p.socket, []string{pluginapi.Version}, `invalid name of device plugin socket: the ResourceName "cpu" is invalid`},
		{res, "elsewhere.sock", []string{pluginapi.Version}, `device plugin endpoint "elsewhere.sock" is not an absolute path`},
	} {
		if err := e.m.ValidatePlugin(tc.name, tc.endpoint, tc.versions); err == nil || err.Error() != tc.want {
			t.Errorf("%+v: %v", tc, err)
		}
	}
	if err := e.m.ValidatePlugin(res, p.socket, []string{pluginapi.Version}); err != nil {
		t.Fatal(err)
	}
	if err := e.m.RegisterPlugin(res, p.socket, []string{pluginapi.Version}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "its device", capacityIs(e.m, 1, 1))
	e.m.DeRegisterPlugin(res, p.socket)
	waitFor(t, "its device unhealthy once deregistered", capacityIs(e.m, 1, 0))
}
