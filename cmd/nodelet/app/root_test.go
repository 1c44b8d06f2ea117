package app

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
)

func verbs(t *testing.T, args ...string) []string {
	t.Helper()
	var out []string
	for _, c := range newRootCmd(args).Commands() {
		if c.Name() != "help" && c.Name() != "completion" {
			out = append(out, c.Name())
		}
	}
	return out
}

// The table's names are the commands' own, the root's help lists every verb, and a command line
// that names a verb builds only that one.
func TestRootBuildsTheNamedVerbOnly(t *testing.T) {
	for _, sub := range subcommands {
		if got := sub.build().Name(); got != sub.name {
			t.Errorf("subcommands names %q for the command %q", sub.name, got)
		}
	}
	if got := verbs(t, "--help"); len(got) != len(subcommands) {
		t.Errorf("root help builds %v, want all %d verbs", got, len(subcommands))
	}
	if got := verbs(t, "--log-level", "debug", "runtime", "--listen", "unix:///x.sock"); len(got) != 1 || got[0] != "runtime" {
		t.Errorf("nodelet runtime builds %v", got)
	}

	var help bytes.Buffer
	root := newRootCmd([]string{"--help"})
	root.SetOut(&help)
	root.SetArgs([]string{"--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, sub := range subcommands {
		if !strings.Contains(help.String(), "\n  "+sub.name+" ") {
			t.Errorf("root help does not list %s:\n%s", sub.name, help.String())
		}
	}
}

// Started as kubelet (a link kubeadm's unit runs as /usr/bin/kubelet), nodelet is the agent with
// the kubelet's flags; under any other name its verbs are its own.
func TestStartedAsKubeletIsTheAgent(t *testing.T) {
	for _, tc := range []struct {
		argv0 string
		args  []string
		want  []string
	}{
		{"/usr/bin/kubelet", []string{"--kubeconfig", "k"}, []string{"agent", "--kubeconfig", "k"}},
		{"kubelet", nil, []string{"agent"}},
		{"/usr/local/bin/nodelet", []string{"up"}, []string{"up"}},
		{"/opt/kubelet/nodelet", []string{"runtime"}, []string{"runtime"}},
		{"kubelet-old", []string{"up"}, []string{"up"}},
	} {
		if got := argsFor(tc.argv0, tc.args); !slices.Equal(got, tc.want) {
			t.Errorf("argsFor(%q, %q) = %q, want %q", tc.argv0, tc.args, got, tc.want)
		}
	}
	// What runs is the agent, with its flags: its help, not the root's.
	var out bytes.Buffer
	cmd := commandLine("/usr/bin/kubelet", []string{"--kubeconfig", "/nonexistent", "--help"})
	cmd.SetOut(&out)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("started as kubelet: %v", err)
	}
	if !strings.Contains(out.String(), "nodelet agent [flags]") || !strings.Contains(out.String(), "--kubeconfig") {
		t.Fatalf("started as kubelet, the help printed is not the agent's:\n%.400s", out.String())
	}
}
