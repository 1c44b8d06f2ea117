package devicemanager

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/nodelet/nodelet/agent/internal/resourcename"
)

// registration is the Registration service plugins call on the agent's socket.
type registration struct {
	pluginapi.UnimplementedRegistrationServer
	m *Manager
	// ctx is the server's: a plugin's ListAndWatch stream lives as long as the agent, not as
	// the Register call.
	ctx context.Context
}

// Register validates the request as the kubelet does (its messages), connects to the plugin's
// endpoint, asks its options and starts following its devices. The plugin learns of a failure
// from the error, and its devices never reach the Node.
func (r *registration) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	m := r.m
	m.log.Info("Got registration request from device plugin with resource", "resourceName", req.ResourceName)
	if req.Version != pluginapi.Version {
		return &pluginapi.Empty{}, fmt.Errorf("requested API version %q is not supported by kubelet. Supported version is %q",
			req.Version, pluginapi.SupportedVersions)
	}
	if !resourcename.IsExtended(req.ResourceName) {
		return &pluginapi.Empty{}, fmt.Errorf("the ResourceName %q is invalid", req.ResourceName)
	}
	// The kubelet joins the endpoint to its folder as given; here it must name a socket in that
	// folder, so that no registration makes the agent dial a path of its choosing elsewhere.
	if e := req.Endpoint; e == "" || e != filepath.Base(e) || e == "." || e == ".." || e == filepath.Base(m.SocketPath()) {
		return &pluginapi.Empty{}, fmt.Errorf("device plugin endpoint %q must be the name of a socket in %s", e, m.dir)
	}
	e, err := dial(r.ctx, req.ResourceName, filepath.Join(m.dir, req.Endpoint))
	if err != nil {
		m.log.Error("device plugin not connected", "resourceName", req.ResourceName, "err", err)
		return &pluginapi.Empty{}, err
	}
	m.mu.Lock()
	serving := m.serving != nil
	if serving {
		m.followers.Add(1)
	}
	m.mu.Unlock()
	if !serving {
		e.close()
		return &pluginapi.Empty{}, errors.New("the device manager is stopping")
	}
	m.connected(e)
	go func() {
		defer m.followers.Done()
		m.follow(r.ctx, e)
	}()
	return &pluginapi.Empty{}, nil
}

// follow reads the plugin's ListAndWatch stream until it ends, then marks the plugin gone.
func (m *Manager) follow(ctx context.Context, e *endpoint) {
	stream, err := e.client.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		m.disconnected(e, err)
		return
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			m.disconnected(e, err)
			return
		}
		m.listed(e, resp.Devices)
	}
}

// ValidatePlugin takes a device plugin registering through the plugin manager's folder
// (plugins_registry, pluginregistration type DevicePlugin) rather than kubelet.sock: it must
// speak v1beta1 and name an extended resource, with the kubelet's messages.
func (m *Manager) ValidatePlugin(name, endpoint string, versions []string) error {
	if !slices.Contains(versions, pluginapi.Version) {
		return fmt.Errorf("manager version, %s, is not among plugin supported versions %v", pluginapi.Version, versions)
	}
	if !resourcename.IsExtended(name) {
		return fmt.Errorf("invalid name of device plugin socket: the ResourceName %q is invalid", name)
	}
	if !filepath.IsAbs(endpoint) {
		return fmt.Errorf("device plugin endpoint %q is not an absolute path", endpoint)
	}
	return nil
}

// RegisterPlugin connects to the plugin at endpoint and follows its devices, as Register does.
func (m *Manager) RegisterPlugin(name, endpoint string, _ []string) error {
	m.mu.Lock()
	ctx := m.serving
	if ctx != nil {
		m.followers.Add(1) // under mu: stopServing clears serving before it waits
	}
	m.mu.Unlock()
	if ctx == nil {
		return errors.New("the device manager is not serving")
	}
	e, err := dial(ctx, name, endpoint)
	if err != nil {
		m.followers.Done()
		return err
	}
	m.connected(e)
	go func() {
		defer m.followers.Done()
		m.follow(ctx, e)
	}()
	return nil
}

// DeRegisterPlugin closes the plugin's connection: its devices turn unhealthy for the grace
// period, as when its ListAndWatch stream ends.
func (m *Manager) DeRegisterPlugin(name, endpoint string) {
	m.mu.Lock()
	e := m.endpoints[name]
	m.mu.Unlock()
	if e != nil && e.path == endpoint {
		m.disconnected(e, errors.New("deregistered"))
	}
}
