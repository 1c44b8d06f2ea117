// Package cdi injects Container Device Interface devices into containers' OCI specs: the devices
// a container config names (CRI's cdi_devices, which the kubelet fills from device plugins, and
// the cdi.k8s.io/ annotations older clients use), resolved against the CDI spec folders the
// vendors' tools write, as containerd and CRI-O resolve them.
package cdi

import (
	"errors"
	"fmt"
	"sync"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

// DefaultSpecDirs are where CDI specs live by default (the CDI spec's, and containerd's).
var DefaultSpecDirs = []string{"/etc/cdi", "/var/run/cdi"}

// ErrDevice: a container names a CDI device that cannot be injected (unknown, or its spec broken).
var ErrDevice = errors.New("CDI device")

// Injector resolves device names against the spec folders.
type Injector struct {
	mu    sync.Mutex
	cache *cdi.Cache
}

// New reads the spec folders when a container first names a device; none given reads nothing.
func New(dirs []string) (*Injector, error) {
	if len(dirs) == 0 {
		return nil, nil
	}
	// No watch of the folders: they are read again at each injection, so a spec a vendor tool
	// writes is seen by the next container and nothing runs in the background.
	c, err := cdi.NewCache(cdi.WithSpecDirs(dirs...), cdi.WithAutoRefresh(false))
	if err != nil {
		return nil, fmt.Errorf("CDI spec folders %v: %w", dirs, err)
	}
	return &Injector{cache: c}, nil
}

// Devices are the fully qualified CDI device names cfg asks for: its cdi_devices, then those of
// its cdi.k8s.io/ annotations, each once.
func Devices(cfg *runtimeapi.ContainerConfig) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	add := func(name string) {
		if name != "" && !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	for _, d := range cfg.GetCDIDevices() {
		add(d.GetName())
	}
	_, annotated, err := cdi.ParseAnnotations(cfg.GetAnnotations())
	if err != nil {
		return nil, fmt.Errorf("%w annotations: %w", ErrDevice, err)
	}
	for _, d := range annotated {
		add(d)
	}
	return out, nil
}

// InjectContainer adds the CDI devices cfg names (Devices) to spec.
func (i *Injector) InjectContainer(spec *specs.Spec, cfg *runtimeapi.ContainerConfig) error {
	devices, err := Devices(cfg)
	if err != nil {
		return err
	}
	return i.Inject(spec, devices)
}

// Inject adds the devices' edits (device nodes, mounts, env, hooks) to spec; a name that cannot be
// resolved fails the whole injection, naming it. A nil Injector refuses any device.
func (i *Injector) Inject(spec *specs.Spec, devices []string) error {
	if len(devices) == 0 {
		return nil
	}
	if i == nil {
		return fmt.Errorf("%w %v: no CDI spec folders are configured (--cdi-spec-dirs)", ErrDevice, devices)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if err := i.cache.Refresh(); err != nil {
		// A broken spec file is reported; the devices of the others still resolve.
		if _, err2 := i.cache.InjectDevices(spec, devices...); err2 != nil {
			return fmt.Errorf("%w %v: %w (spec folders: %w)", ErrDevice, devices, err2, err)
		}
		return nil
	}
	if unresolved, err := i.cache.InjectDevices(spec, devices...); err != nil {
		return fmt.Errorf("%w %v: %w", ErrDevice, unresolved, err)
	}
	return nil
}
