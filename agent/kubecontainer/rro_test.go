package kubecontainer

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestResolveRecursiveReadOnly: the kubelet's table, with its messages.
func TestResolveRecursiveReadOnly(t *testing.T) {
	mode := func(m v1.RecursiveReadOnlyMode) *v1.RecursiveReadOnlyMode { return &m }
	prop := func(p v1.MountPropagationMode) *v1.MountPropagationMode { return &p }
	for _, tc := range []struct {
		name      string
		mount     v1.VolumeMount
		supported bool
		want      bool
		err       string
	}{
		{name: "unset", mount: v1.VolumeMount{ReadOnly: true}, supported: true},
		{name: "disabled", mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyDisabled)}, supported: true},
		{name: "disabled on a writable mount", mount: v1.VolumeMount{RecursiveReadOnly: mode(v1.RecursiveReadOnlyDisabled)}},
		{name: "if possible, supported", mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyIfPossible)}, supported: true, want: true},
		{name: "if possible, not supported", mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyIfPossible)}},
		{name: "enabled, supported", mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyEnabled)}, supported: true, want: true},
		{name: "enabled, propagation None", mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyEnabled),
			MountPropagation: prop(v1.MountPropagationNone)}, supported: true, want: true},
		{name: "enabled, not supported", mount: v1.VolumeMount{Name: "vol", ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyEnabled)},
			err: `volume "vol" requested recursive read-only mode, but it is not supported by the runtime`},
		{name: "enabled, writable", mount: v1.VolumeMount{Name: "vol", RecursiveReadOnly: mode(v1.RecursiveReadOnlyEnabled)}, supported: true,
			err: `volume "vol" requested recursive read-only mode, but it is not read-only`},
		{name: "if possible, writable", mount: v1.VolumeMount{Name: "vol", RecursiveReadOnly: mode(v1.RecursiveReadOnlyIfPossible)}, supported: true,
			err: `volume "vol" requested recursive read-only mode, but it is not read-only`},
		{name: "enabled, propagating", mount: v1.VolumeMount{Name: "vol", ReadOnly: true, RecursiveReadOnly: mode(v1.RecursiveReadOnlyEnabled),
			MountPropagation: prop(v1.MountPropagationHostToContainer)}, supported: true,
			err: `volume "vol" requested recursive read-only mode, but it is not compatible with propagation "HostToContainer"`},
		{name: "unknown mode", mount: v1.VolumeMount{ReadOnly: true, RecursiveReadOnly: mode("Always")}, supported: true,
			err: `unknown recursive read-only mode "Always"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveRecursiveReadOnly(tc.mount, tc.supported)
			switch {
			case tc.err != "":
				if err == nil || err.Error() != tc.err {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
			case err != nil:
				t.Fatal(err)
			case got != tc.want:
				t.Fatalf("recursive %v, want %v", got, tc.want)
			}
		})
	}
}
