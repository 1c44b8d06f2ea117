package app

import "testing"

// The runtime's flags, alone and under `nodelet up`, show the defaults users have: the values
// moved to runtime/config, the flags did not change.
func TestRuntimeAndUpFlagDefaults(t *testing.T) {
	want := map[string]string{
		"listen":                  "unix:///run/nodelet/runtime.sock",
		"default-runtime-handler": "", // crun where installed, else runc: runtime/config
		"cgroup-parent":           "/nodelet",
		"streaming-address":       "127.0.0.1:0",
		"cni-conf-dir":            "/etc/cni/net.d",
		"cni-bin-dir":             "[/usr/lib/cni,/opt/cni/bin]",
		"log-size-max":            "1Gi",
		"runtime-handler":         "[]",
		"conmon":                  "",
		"catatonit":               "",
		"no-network":              "false",
		"no-default-network":      "false",
		"cdi-spec-dirs":           "[/etc/cdi,/var/run/cdi]",
	}
	for _, cmd := range []string{"runtime", "up"} {
		t.Run(cmd, func(t *testing.T) {
			c := newRuntimeCmd()
			if cmd == "up" {
				c = newUpCmd()
			}
			for name, def := range want {
				f := c.Flags().Lookup(name)
				if f == nil || f.DefValue != def {
					t.Errorf("--%s: %+v, want default %q", name, f, def)
				}
			}
		})
	}
}
