package kuberuntime

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

func TestDevicesAppliedAsTheKubeletDoes(t *testing.T) {
	cfg := &runtimeapi.ContainerConfig{
		Envs:        []*runtimeapi.KeyValue{{Key: "OWN", Value: []byte("mine")}},
		Mounts:      []*runtimeapi.Mount{{ContainerPath: "/data", HostPath: "/vol"}},
		Annotations: map[string]string{AnnotationContainerHash: "ours"},
	}
	applyDevices(cfg, &pluginapi.ContainerAllocateResponse{
		Envs:        map[string]string{"OWN": "plugin's", "VISIBLE": "0,1"},
		Mounts:      []*pluginapi.Mount{{ContainerPath: "/dev-lib", HostPath: "/opt/lib", ReadOnly: true}},
		Devices:     []*pluginapi.DeviceSpec{{ContainerPath: "/dev/x0", HostPath: "/dev/x0", Permissions: "rw"}},
		Annotations: map[string]string{AnnotationContainerHash: "plugin's", "example.com/a": "1"},
		CdiDevices:  []*pluginapi.CDIDevice{{Name: "example.com/x=0"}},
	})
	envs := map[string]string{}
	for _, e := range cfg.Envs {
		if _, dup := envs[e.Key]; dup {
			t.Errorf("env %s twice", e.Key)
		}
		envs[e.Key] = string(e.Value)
	}
	if envs["OWN"] != "mine" || envs["VISIBLE"] != "0,1" {
		t.Errorf("envs %v", envs)
	}
	if len(cfg.Mounts) != 2 || cfg.Mounts[0].ContainerPath != "/dev-lib" || !cfg.Mounts[0].Readonly || cfg.Mounts[1].ContainerPath != "/data" {
		t.Errorf("mounts %v: the plugin's come first", cfg.Mounts)
	}
	if len(cfg.Devices) != 1 || cfg.Devices[0].HostPath != "/dev/x0" || cfg.Devices[0].Permissions != "rw" {
		t.Errorf("devices %v", cfg.Devices)
	}
	if len(cfg.CDIDevices) != 1 || cfg.CDIDevices[0].Name != "example.com/x=0" {
		t.Errorf("CDI devices %v", cfg.CDIDevices)
	}
	if cfg.Annotations[AnnotationContainerHash] != "ours" || cfg.Annotations["example.com/a"] != "1" {
		t.Errorf("annotations %v", cfg.Annotations)
	}
	applyDevices(cfg, nil)
}
