package cdi

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const vendorSpec = `cdiVersion: "0.6.0"
kind: vendor.example/gpu
containerEdits:
  env: ["VENDOR_DRIVER=1"]
devices:
- name: gpu0
  containerEdits:
    env: ["GPU=0"]
    mounts:
    - {hostPath: /usr/share/gpu0, containerPath: /opt/gpu, options: [ro, bind]}
- name: gpu1
  containerEdits:
    env: ["GPU=1"]
`

func specDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestDevicesFromTheFieldAndAnnotations(t *testing.T) {
	cfg := &runtimeapi.ContainerConfig{
		CDIDevices:  []*runtimeapi.CDIDevice{{Name: "vendor.example/gpu=gpu0"}, {Name: "vendor.example/gpu=gpu0"}},
		Annotations: map[string]string{"cdi.k8s.io/plugin_x": "vendor.example/gpu=gpu1", "other": "x"},
	}
	got, err := Devices(cfg)
	if err != nil || !slices.Equal(got, []string{"vendor.example/gpu=gpu0", "vendor.example/gpu=gpu1"}) {
		t.Fatalf("Devices: %v %v", got, err)
	}
	bad := &runtimeapi.ContainerConfig{Annotations: map[string]string{"cdi.k8s.io/x": "not a device name"}}
	if _, err := Devices(bad); !errors.Is(err, ErrDevice) {
		t.Errorf("a malformed annotation: %v", err)
	}
}

func TestInjectAddsTheDevicesEdits(t *testing.T) {
	inj, err := New([]string{specDir(t, map[string]string{"vendor.yaml": vendorSpec})})
	if err != nil {
		t.Fatal(err)
	}
	spec := &specs.Spec{Process: &specs.Process{Env: []string{"PATH=/bin"}}, Linux: &specs.Linux{}}
	cfg := &runtimeapi.ContainerConfig{CDIDevices: []*runtimeapi.CDIDevice{{Name: "vendor.example/gpu=gpu0"}}}
	if err := inj.InjectContainer(spec, cfg); err != nil {
		t.Fatal(err)
	}
	env := strings.Join(spec.Process.Env, " ")
	if !strings.Contains(env, "GPU=0") || !strings.Contains(env, "VENDOR_DRIVER=1") || strings.Contains(env, "GPU=1") {
		t.Errorf("env %q", env)
	}
	if len(spec.Mounts) != 1 || spec.Mounts[0].Destination != "/opt/gpu" || spec.Mounts[0].Source != "/usr/share/gpu0" {
		t.Errorf("mounts %+v", spec.Mounts)
	}
}

func TestInjectRefusesWhatItCannotResolve(t *testing.T) {
	dir := specDir(t, map[string]string{"vendor.yaml": vendorSpec, "broken.yaml": "cdiVersion: [\n"})
	inj, err := New([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	spec := &specs.Spec{Process: &specs.Process{}, Linux: &specs.Linux{}}
	// The good spec's devices still resolve beside a broken file.
	if err := inj.Inject(spec, []string{"vendor.example/gpu=gpu1"}); err != nil {
		t.Errorf("a device of a good spec beside a broken one: %v", err)
	}
	err = inj.Inject(spec, []string{"vendor.example/gpu=gpu7"})
	if !errors.Is(err, ErrDevice) || !strings.Contains(err.Error(), "vendor.example/gpu=gpu7") {
		t.Errorf("an unknown device: %v", err)
	}
	// A spec written after the injector was made is read at the next injection.
	if err := os.WriteFile(filepath.Join(dir, "late.yaml"), []byte(strings.ReplaceAll(vendorSpec, "vendor.example/gpu", "late.example/dev")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := inj.Inject(spec, []string{"late.example/dev=gpu0"}); err != nil {
		t.Errorf("a spec written later: %v", err)
	}
	var none *Injector
	if err := none.Inject(spec, []string{"vendor.example/gpu=gpu0"}); !errors.Is(err, ErrDevice) {
		t.Errorf("no spec folders: %v", err)
	}
}
