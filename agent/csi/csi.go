// Package csi is the node side of CSI, as the kubelet's CSI volume plugin does it: drivers
// registered through the plugin manager (their node-driver-registrar's socket) are recorded on
// the node (the CSINode object, the csi.volume.kubernetes.io/nodeid annotation, topology labels),
// and persistent volumes of theirs are staged once per node (NodeStageVolume at
// <root-dir>/plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/globalmount) and published per pod
// (NodePublishVolume at <root-dir>/pods/<uid>/volumes/kubernetes.io~csi/<volume>/mount), with the
// kubelet's vol_data.json beside each, so that either agent finds what the other left.
package csi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/nodelet/nodelet/agent/kubeclient"
)

// PluginName is the kubelet's name for the CSI volume plugin, in paths and messages.
const PluginName = "kubernetes.io/csi"

// Client is the part of the API the node side of CSI uses (a *kubeclient.Client is one); nil
// standalone, where there is no CSINode and no persistent volume.
type Client interface {
	Nodes() kubeclient.NodeInterface
	CSINodes() kubeclient.CSINodeInterface
	CSIDrivers() kubeclient.CSIDriverInterface
	VolumeAttachments() kubeclient.VolumeAttachmentInterface
}

// Config is what the manager needs to know of the node.
type Config struct {
	NodeName string
	RootDir  string
	Client   Client
	// Secrets reads a Secret's data, for the drivers' stage and publish secrets.
	Secrets func(ctx context.Context, namespace, name string) (map[string][]byte, error)
	// Token gets pods' service account tokens for drivers that ask (CSIDriver tokenRequests);
	// nil refuses those drivers' volumes.
	Token TokenFunc
	Log   *slog.Logger
}

// Manager keeps the registered drivers and mounts their volumes.
type Manager struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	drivers map[string]driver
	inUse   map[types.UID]map[v1.UniqueVolumeName]bool // attachable volumes, by pod
}

// driver is one registered driver: where it listens and the highest CSI version it speaks.
type driver struct {
	endpoint string
	version  *version.Version
}

// New makes the manager, the volumes in use found from what pods' folders publish; drivers come
// through the plugin manager (RegisterPlugin).
func New(cfg Config) *Manager {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	m := &Manager{cfg: cfg, log: cfg.Log.With("component", "csi"), drivers: map[string]driver{},
		inUse: map[types.UID]map[v1.UniqueVolumeName]bool{}}
	m.reconstruct()
	return m
}

func logf(format string, args ...any) string { return PluginName + ": " + fmt.Sprintf(format, args...) }

// highest is the highest 1.x version among versions, with the kubelet's messages when none.
func (m *Manager) highest(caller, name string, versions []string) (*version.Version, error) {
	if len(versions) == 0 {
		return nil, errors.New(logf("%s for CSI driver %q failed. Plugin returned an empty list for supported versions", caller, name))
	}
	var best *version.Version
	for _, s := range versions {
		v, err := version.ParseGeneric(s)
		if err != nil || v.Major() != 1 {
			continue
		}
		if best == nil || v.GreaterThan(best) {
			best = v
		}
	}
	if best == nil {
		return nil, errors.New(logf("%s for CSI driver %q failed. None of the versions specified %q are supported. err=%v",
			caller, name, versions, errors.New("no 1.x version")))
	}
	return best, nil
}

// ValidatePlugin accepts a driver speaking CSI 1.x, unless one of its name is registered with a
// higher version.
func (m *Manager) ValidatePlugin(name, endpoint string, versions []string) error {
	v, err := m.highest("RegisterPlugin", name, versions)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if d, ok := m.drivers[name]; ok && d.version.GreaterThan(v) {
		return errors.New(logf("RegisterPlugin for CSI driver %q failed. Another driver with the same name is already registered with a higher supported version: %q",
			name, d.version))
	}
	if strings.TrimSpace(endpoint) == "" {
		return fmt.Errorf("validation failed for CSI Driver %s at endpoint %s: empty endpoint", name, endpoint)
	}
	return nil
}

// RegisterPlugin records the driver, asks its node ID and topology, and records them on the node;
// a driver the node cannot be recorded for is not kept.
func (m *Manager) RegisterPlugin(name, endpoint string, versions []string) error {
	v, err := m.highest("RegisterPlugin", name, versions)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.drivers[name] = driver{endpoint: endpoint, version: v}
	m.mu.Unlock()
	c, err := dial(endpoint)
	if err != nil {
		m.forget(name, endpoint)
		return fmt.Errorf("failed to create CSI client for driver %q: %w", name, err)
	}
	defer c.close()
	info, err := c.info(context.Background())
	if err != nil {
		m.forget(name, endpoint)
		return fmt.Errorf("failed to get NodeGetInfo from driver %q: %w", name, err)
	}
	if err := m.install(context.Background(), name, info.GetNodeId(), info.GetMaxVolumesPerNode(), info.GetAccessibleTopology().GetSegments()); err != nil {
		m.forget(name, endpoint)
		return fmt.Errorf("failed to update driver %q: %w", name, err)
	}
	m.log.Info("CSI driver registered", "driver", name, "endpoint", endpoint, "nodeID", info.GetNodeId())
	return nil
}

// DeRegisterPlugin forgets the driver and removes it from the node's records.
func (m *Manager) DeRegisterPlugin(name, endpoint string) {
	if !m.forget(name, endpoint) {
		return
	}
	if err := m.uninstall(context.Background(), name); err != nil {
		m.log.Error("CSI driver not removed from the node's records", "driver", name, "err", err)
	}
}

// forget drops the driver if it is still the one at endpoint.
func (m *Manager) forget(name, endpoint string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d, ok := m.drivers[name]; ok && d.endpoint == endpoint {
		delete(m.drivers, name)
		return true
	}
	return false
}

// Drivers are the registered drivers' names, sorted.
func (m *Manager) Drivers() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for n := range m.drivers {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// client dials a registered driver; an unregistered one is the kubelet's transient error.
func (m *Manager) client(name string) (*client, error) {
	m.mu.Lock()
	d, ok := m.drivers[name]
	m.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("driver name %s not found in the list of registered CSI drivers", name)
	}
	return dial(d.endpoint)
}
