package agentconfig

import "testing"

func TestSeccompDefault(t *testing.T) {
	for _, c := range []struct {
		name string
		file string
		args []string
		want bool
	}{
		{name: "default off"},
		{name: "file", file: header + "seccompDefault: true\n", want: true},
		{name: "flag", args: []string{"--seccomp-default"}, want: true},
		{name: "flag beats file", file: header + "seccompDefault: true\n", args: []string{"--seccomp-default=false"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := configOf(t, c.file, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			if *cfg.Kubelet.SeccompDefault != c.want {
				t.Fatalf("SeccompDefault %v, want %v", *cfg.Kubelet.SeccompDefault, c.want)
			}
		})
	}
}
