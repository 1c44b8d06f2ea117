package kuberuntime

import (
	"context"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// DeviceOptions are what the device plugins' Allocate answers give a container
// (*devicemanager.Manager): nil when it has no devices.
type DeviceOptions interface {
	RunContainerOptions(ctx context.Context, pod *v1.Pod, c *v1.Container) (*pluginapi.ContainerAllocateResponse, error)
}

// applyDevices puts a container's device plugin answers into its config as the kubelet does:
// the plugins' environment and mounts before the container's own (a variable the container sets
// itself keeps its value; a volume mounted at the same path comes later), their device nodes and CDI device names, and
// their annotations under the kubelet's own.
func applyDevices(cfg *runtimeapi.ContainerConfig, d *pluginapi.ContainerAllocateResponse) {
	if d == nil {
		return
	}
	own := map[string]bool{}
	for _, e := range cfg.Envs {
		own[e.Key] = true
	}
	var envs []*runtimeapi.KeyValue
	for _, k := range slices.Sorted(maps.Keys(d.Envs)) {
		if own[k] {
			continue
		}
		envs = append(envs, &runtimeapi.KeyValue{Key: k, Value: []byte(d.Envs[k])})
	}
	cfg.Envs = append(envs, cfg.Envs...)
	var mounts []*runtimeapi.Mount
	for _, m := range d.Mounts {
		mounts = append(mounts, &runtimeapi.Mount{ContainerPath: m.ContainerPath, HostPath: m.HostPath, Readonly: m.ReadOnly})
	}
	cfg.Mounts = append(mounts, cfg.Mounts...)
	for _, dev := range d.Devices {
		cfg.Devices = append(cfg.Devices, &runtimeapi.Device{ContainerPath: dev.ContainerPath, HostPath: dev.HostPath, Permissions: dev.Permissions})
	}
	for _, c := range d.CdiDevices {
		cfg.CDIDevices = append(cfg.CDIDevices, &runtimeapi.CDIDevice{Name: c.Name})
	}
	if len(d.Annotations) > 0 && cfg.Annotations == nil {
		cfg.Annotations = map[string]string{}
	}
	for k, v := range d.Annotations {
		if _, ours := cfg.Annotations[k]; !ours {
			cfg.Annotations[k] = v
		}
	}
}
